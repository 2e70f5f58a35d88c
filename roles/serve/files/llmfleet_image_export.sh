#!/bin/sh
# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
# The forced command of the image keys (authorized_keys command=..., restrict, from=<the peer's fabric
# IP>; roles/serve/tasks/container_copy.yml): a peer's `ssh ... save <image>` gets `podman save` (or
# docker's), on stdout, of one image: one this node built for a release
# (localhost/llmfleet-engine:<release>) or one named by its ID (sha256:<64 hex>, a pinned image it
# pulled). Nothing else runs with that key.
set -eu
set -f
engine="$1"
# shellcheck disable=SC2086  # split on purpose (glob off above): the client's words
set -- ${SSH_ORIGINAL_COMMAND:-}
if [ "$#" -ne 2 ] || [ "$1" != save ]; then
    echo "llmfleet-image-export: refused: only 'save localhost/llmfleet-engine:<release>' or 'save sha256:<id>'" >&2
    exit 2
fi
case "$2" in
    localhost/llmfleet-engine:*)
        release="${2#localhost/llmfleet-engine:}"
        case "$release" in
            "" | *[!A-Za-z0-9._-]*) echo "llmfleet-image-export: refused: bad release in $2" >&2; exit 2 ;;
        esac ;;
    sha256:*)
        id="${2#sha256:}"
        if [ "${#id}" -ne 64 ] || [ -n "$(printf '%s' "$id" | tr -d '0-9a-f')" ]; then
            echo "llmfleet-image-export: refused: $2 is not an image ID" >&2
            exit 2
        fi ;;
    *) echo "llmfleet-image-export: refused: $2 is not an image this node builds or an image ID" >&2; exit 2 ;;
esac
exec "$engine" save "$2"
