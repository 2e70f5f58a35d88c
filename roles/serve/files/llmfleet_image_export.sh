#!/bin/sh
# The forced command of the image keys (authorized_keys command=..., restrict, from=<the peer's fabric
# IP>; roles/serve/tasks/container_image.yml): a peer's `ssh ... save <image>` gets `podman save` (or
# docker's) of one image this node built for a release, on stdout. Nothing else runs with that key.
set -eu
set -f
engine="$1"
# shellcheck disable=SC2086  # split on purpose (glob off above): the client's words
set -- ${SSH_ORIGINAL_COMMAND:-}
if [ "$#" -ne 2 ] || [ "$1" != save ]; then
    echo "llmfleet-image-export: refused: only 'save localhost/llmfleet-engine:<release>'" >&2
    exit 2
fi
release="${2#localhost/llmfleet-engine:}"
case "$2" in
    localhost/llmfleet-engine:*) ;;
    *) echo "llmfleet-image-export: refused: $2 is not an image this node builds" >&2; exit 2 ;;
esac
case "$release" in
    "" | *[!A-Za-z0-9._-]*) echo "llmfleet-image-export: refused: bad release in $2" >&2; exit 2 ;;
esac
exec "$engine" save "$2"
