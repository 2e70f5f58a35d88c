#!/usr/bin/env bash
# GPU validation on an offline host without systemd (issue 11): the collection renders the host's
# files ON the host (its roles, check mode), its units run there, its validate.yml and bench.yml
# check and measure them there, and its nccl role builds NCCL there.
#
# On the controller first: the offline wheel bundle (../shared/offline-gpu/build_bundle.sh) and
#   tests/gpu/prepare_bundle.sh   (packs bundle parts + ansible-core wheels into carry folders)
# On the host, from the repository root, phase by phase (each is idempotent):
#   receive    copy the carried carry folders ($CARRY_GLOB, default offline/x*/, offline/s*/ and
#              .gpu-bundle/x*/) to $XFER
#   ansible    ansible-core from the carried wheels (/root/gpu-ansible), the collection linked for it
#   render     tests/gpu/render.sh ON the host (the roles in check mode: PID 1's limits, GPU count of
#              this host); TP = GPUs of the host (at most 2); the -e values go to $XFER/extra.json,
#              and $EXTRA_VARS (files relative to the repo, e.g. tests/gpu/extra/sglang.yml) to
#              $XFER/extra-*.yml: every later playbook of this runner gets the same -e files
#   setup      host facts; service user; release wrappers; the rendered env files to /etc/llmfleet
#   nccl_role  playbooks/nccl.yml for real in the background (needs the carried NCCL source)
#   unpack     the offline wheel bundle (vLLM + Ray) into $VLLM_BUNDLE/site
#   unpack_sglang  the SGLang bundle (tests/gpu/build_sglang_bundle.sh, carried as sglang/part.*) into
#              $SGLANG_BUNDLE/site
#   model      the tiny random Llama (roles/models/files/make_tiny_llama.py), bf16-served
#   up         the rendered Ray unit and engine unit started by unit_exec.py (as systemd would; it
#              records them for `unit_exec.py is-active/list-units`); time to healthy -> healthy-TAG.json
#              (TAG = engine-backend-tpN of the render, e.g. vllm-ray-tp1, sglang-native-tp1)
#   validate   playbooks/validate.yml -i inventories/gpu-host, local connection, validate_systemctl =
#              unit_exec.py (no systemd here): Ray GPUs, env audit, MTU, serve unit, smoke, stream
#              -> validate-TAG/validate.{json,md}
#   bench      playbooks/bench.yml -i inventories/gpu-host: `vllm bench serve` per level, CSV + PNG
#              -> bench-TAG/sweep.{csv,png}
#   collection (older path) Ray probe -> engine unit TP=2 -> validate_gpu.py checks -> in-process sweep
#   single     (older path) the engine unit rendered for TP=1 (one GPU): time to healthy, checks
#   byhand     Ray + `vllm serve` started by hand with the rendered unit's flags, swept by the same
#              playbooks/bench.yml (-> bench-byhand-TAG/), compared with bench-TAG/ (ratio, PNG)
#   ab         the collection's units (A) and the same flags by hand (B: root, its own `ray start --head`
#              on other ports, the API on port+1) serving at once on the one GPU, then
#              `bench_serve_sweep.py ab`: ABBA blocks per level, one run -> $OUT/ab-TAG/ as it goes
#              (AB_CONC, default 4,32; AB_BLOCKS, default 4)
#   nccl       wait for the nccl role, then all-reduce busbw through stock and built NCCL
#   down       stop the engine and Ray units
#   pack       results to $OUT (results.tgz + summary)
#   ab4        emulated nodes (INVENTORY=inventories/gpu-4node): the collection's units (A) against the
#              field notes' own commands (B: a `ray start` per node with the notes' NCCL/Gloo socket
#              settings, `vllm serve` with the rendered flags, on other loopback IPs and ports), both
#              serving at once, ABBA blocks per level (AB_CONC, default 1,8,32) -> $OUT/ab-TAG/
#   metrics    a scrape of the engine's /metrics -> $RES/metrics-TAG-LABEL.txt (bench does it before
#              and after its sweep)
# Environment: XFER (/root/gpu-xfer), RES (/root/gpu-results), OUT (where results go), INVENTORY
# (inventories/gpu-host; inventories/gpu-4node: four emulated nodes, each node's files rendered
# into $XFER/stage/<host>/, its units started and reported apart: unit_exec.py --node).
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
XFER=${XFER:-/root/gpu-xfer}
RES=${RES:-/root/gpu-results}
OUT=${OUT:-/tmp/gpu-out}
PY=${PY:-$(command -v python3)}
# where the bundles are unpacked (their site/ directories; the inventory's llmfleet_gpu_bundle_site
# names the same), and the vLLM release whose `vllm bench serve` bench.yml uses for every engine
VLLM_BUNDLE=${VLLM_BUNDLE:-/opt/llmfleet/bundle}
SGLANG_BUNDLE=${SGLANG_BUNDLE:-/opt/llmfleet/bundle/sglang}
VLLM_RELEASE=${VLLM_RELEASE:-gpu-vllm-0.22.0-bundle}
INVENTORY=${INVENTORY:-inventories/gpu-host}
mkdir -p "$XFER" "$RES" "$OUT"
log() { echo "[gpu $(date +%T)] $*" | tee -a "$RES/run.log"; }
stage_val() { "$PY" -c "import json,sys; d=json.load(open('$XFER/stage/stage.json')); print(eval(sys.argv[1], {}, d))" "$1"; }
now() { date +%s.%N; }
# NVLink multicast off for everything this script itself starts, too.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
as_root_flag() { [[ -f $XFER/as_root ]] && echo --as-root; }
run_as_user() { if [[ -f $XFER/as_root ]]; then echo ""; else stage_val service_user; fi; }

phase_receive() {
  local d
  for d in ${CARRY_GLOB:-"$REPO"/offline/x*/ "$REPO"/offline/s*/ "$REPO"/offline/c*/ "$REPO"/.gpu-bundle/x*/}; do [[ -d $d ]] && cp -a "$d". "$XFER"/; done
  ls -la "$XFER" | tee -a "$RES/run.log"
}

# engine-backend-tpN of the current render (names the results of up/validate/bench); emulated
# nodes: Nnode-engine-backend-tpN-ppM
mode_tag() {
  local n; n=$(nodes | wc -w)
  if (( n > 1 )); then
    stage_val "'${n}node-%s-%s-tp%s-pp%s' % (engine, serve_plan['backend'], serve_plan['tensor_parallel_size'], serve_plan['pipeline_parallel_size'])"
  else stage_val "'%s-%s-tp%s' % (engine, serve_plan['backend'], serve_plan['tensor_parallel_size'])"; fi
}
# the inventory hosts of the render (one name for a one-host inventory), and one value of a host's stage
nodes() { "$PY" -c "import json,sys; print(' '.join(sorted(json.load(open(sys.argv[1])))))" "$XFER/stage/hosts.json" 2>/dev/null || echo single; }
multi() { (( $(nodes | wc -w) > 1 )); }
node_val() { "$PY" -c "import json,sys; d=json.load(open('$XFER/stage/hosts.json'))[sys.argv[1]]; print(eval(sys.argv[2], {}, d))" "$1" "$2"; }
extra_files() { local f; for f in "$XFER"/extra.json "$XFER"/extra-*.yml; do [[ -f $f ]] && printf -- '-e @%s ' "$f"; done; }

need_stage() { [[ -f $XFER/stage/stage.json ]] || { log "no rendered stage ($XFER/stage/stage.json): run the render phase first"; return 1; }; }

phase_setup() {
  need_stage || return 1
  log "host facts"
  {
    echo "== date"; date -u +%FT%TZ
    echo "== nvidia-smi"; nvidia-smi --query-gpu=name,memory.total,driver_version,pci.bus_id --format=csv
    nvidia-smi topo -m 2>&1 | head -8
    echo "== kernel"; uname -r; nproc; grep MemTotal /proc/meminfo
    echo "== python"; "$PY" -c 'import sys, torch, transformers, triton; print(sys.version.split()[0], torch.__version__, torch.version.cuda, transformers.__version__, triton.__version__, torch.cuda.device_count(), torch.cuda.nccl.version())'
    echo "== nvcc"; (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>&1 | tail -2
    echo "== init"; ps -p 1 -o comm=; command -v systemctl || echo "no systemctl"
    echo "== tools"; for t in runuser useradd make gcc g++ cuobjdump tar xz; do printf '%s=%s ' $t "$(command -v $t || echo -)"; done; echo
    echo "== ld"; echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"; ldconfig -p | grep -E 'libcuda.so|libnccl' | head -5
  } > "$RES/host.txt" 2>&1
  cat "$RES/host.txt"
  local user home venv cur site
  user=$(stage_val service_user); home=$(stage_val service_home)
  venv=$(stage_val venv); cur=$(stage_val venv_current); site=$(stage_val bundle_site)
  log "service user $user ($home)"
  id "$user" >/dev/null 2>&1 || useradd --system --home-dir "$home" --shell /usr/sbin/nologin "$user" \
    || { log "useradd failed: services run as root"; touch "$XFER/as_root"; }
  mkdir -p "$home/.config/vllm" "$home/ray" /etc/llmfleet /opt/llmfleet/models /opt/llmfleet/src
  log "the rendered files into place (all but the systemd units, which unit_exec.py reads from the stage)"
  local root
  for root in $(multi && for h in $(nodes); do echo "$XFER/stage/$h"; done || echo "$XFER/stage"); do
    (cd "$root" && find etc/llmfleet var opt -type f 2>/dev/null) | while read -r f; do
      install -D -m 0644 "$root/$f" "/$f"; done
  done
  local secrets; secrets=$(find /etc/llmfleet -name 'llmfleet-serve-*.env')
  chmod 0600 $secrets
  id "$user" >/dev/null 2>&1 && chown -R "$user:$user" "$home" $secrets
  # Ray's token file (the plan's ray_auth): the render writes it no_log, so its text is not in the
  # stage; one random token for the whole emulated cluster, at the path each node's ray.env names
  local tokens f
  tokens=$(grep -hs '^RAY_AUTH_TOKEN_PATH=' $(find /etc/llmfleet -name ray.env) | cut -d= -f2- | tr -d '"' | sort -u)
  [[ -s $XFER/ray_token ]] || "$PY" -c 'import secrets; print(secrets.token_urlsafe(32))' > "$XFER/ray_token"
  for f in $tokens; do
    install -D -m 0600 "$XFER/ray_token" "$f"; id "$user" >/dev/null 2>&1 && chown "$user:$user" "$f"
  done
  log "Ray token files: ${tokens:-none (ray_node_auth disabled)}"
  log "release $venv: wrappers over $PY with $site on PYTHONPATH (no pip install on this host)"
  make_release "$venv" "$site"; ln -sfn "$venv" "$cur"
  # bench.yml's client for every engine: `vllm bench serve` of the vLLM release
  [[ $venv == */$VLLM_RELEASE ]] || make_release "$(dirname "$venv")/$VLLM_RELEASE" "$VLLM_BUNDLE/site"
  if [[ ! -f $XFER/as_root ]] && ! runuser -u "$user" -- "$PY" -c 'import torch; assert torch.cuda.device_count() >= 1' >>"$RES/run.log" 2>&1; then
    log "the service user cannot use the GPUs here: services run as root"; touch "$XFER/as_root"
  fi
}

make_release() {  # $1 = release dir, $2 = PYTHONPATH: bin/{python,vllm,ray}, as console scripts would be
  local venv=$1 site=$2
  mkdir -p "$venv/bin"
  printf '#!/bin/sh\nPYTHONPATH=%s${PYTHONPATH:+:$PYTHONPATH}; export PYTHONPATH\nexec %s "$@"\n' "$site" "$PY" > "$venv/bin/python"
  printf '#!/bin/sh\nexec %s/bin/python -c "import sys; sys.argv[0] = \\"vllm\\"; from vllm.entrypoints.cli.main import main; sys.exit(main())" "$@"\n' "$venv" > "$venv/bin/vllm"
  printf '#!/bin/sh\nexec %s/bin/python -c "import sys; sys.argv[0] = \\"ray\\"; from ray.scripts.scripts import main; sys.exit(main())" "$@"\n' "$venv" > "$venv/bin/ray"
  chmod 0755 "$venv/bin/"*
}

ansible_run() {  # ansible-playbook of the carried ansible-core, local connection, as root (no sudo here)
  ( cd "$REPO" && PYTHONPATH=/root/gpu-ansible ANSIBLE_CONFIG="$REPO/ansible.cfg" ANSIBLE_COLLECTIONS_PATH=/root/gpu-ac \
      ANSIBLE_CACHE_PLUGIN=memory ANSIBLE_NOCOLOR=1 "$PY" /root/gpu-ansible/bin/ansible-playbook "$@" \
      -e ansible_become=false -e ansible_python_interpreter="$PY" $(extra_files) )
}

phase_ansible() {
  log "ansible-core from the carried wheels (the collection's playbooks run here, local connection)"
  rm -rf /root/gpu-ansible; "$PY" -m pip install -q --no-index --no-deps --no-compile --target /root/gpu-ansible "$XFER"/ansible/*.whl \
    >>"$RES/run.log" 2>&1 || { log "ansible-core install failed"; return 1; }
  mkdir -p /root/gpu-ac/ansible_collections/llmfleet; ln -sfn "$REPO" /root/gpu-ac/ansible_collections/llmfleet/cluster
  PYTHONPATH=/root/gpu-ansible "$PY" /root/gpu-ansible/bin/ansible-playbook --version | head -1 | tee -a "$RES/run.log"
}

phase_render() {
  local gpus tp
  gpus=$(nvidia-smi -L | grep -c '^GPU'); tp=$(( gpus >= 2 ? 2 : 1 ))
  if [[ $INVENTORY == inventories/gpu-host ]]; then
    printf '{"llmfleet_tensor_parallel_size": %d, "llmfleet_gpus_per_node": %d}\n' "$tp" "$tp" > "$XFER/extra.json"
  else
    # emulated nodes: the inventory and EXTRA_VARS name the layout; a machine with fewer GPUs than
    # nodes shares them (the plan's llmfleet_machine_gpus: round robin, each vLLM rank its share)
    printf '{"llmfleet_machine_gpus": %d}\n' "$gpus" > "$XFER/extra.json"
  fi
  rm -f "$XFER"/extra-*.yml
  local n=0 f; for f in ${EXTRA_VARS:-}; do n=$((n + 1)); cp "$REPO/$f" "$XFER/extra-$n.yml" || return 1; done
  log "render on this host with the roles (check mode): $gpus GPU(s), $(cat "$XFER/extra.json") ${EXTRA_VARS:-}"
  cp /proc/1/limits "$RES/pid1-limits.txt"
  PATH=/root/gpu-ansible/bin:$PATH PYTHONPATH=/root/gpu-ansible ANSIBLE_COLLECTIONS_PATH=/root/gpu-ac ANSIBLE_NOCOLOR=1 \
    LLMFLEET_STAGE_EXTRA="$(extra_files) -e ansible_python_interpreter=$PY" \
    "$REPO/tests/gpu/render.sh" "$XFER/stage" "$REPO/$INVENTORY" | tee "$RES/render.txt" || return 1
  local tag; tag=$(mode_tag)
  rm -rf "$RES/rendered-$tag"; mkdir -p "$RES/rendered-$tag"
  (cd "$XFER/stage" && cp -a --parents $(find . -path '*/etc/*' -type f) stage.json hosts.json "$RES/rendered-$tag/")
  log "rendered $tag: $(stage_val "' '.join(serve_argv)")"
}

phase_nccl_role() {
  # emulated nodes share one filesystem: the head builds, then the role runs for the other nodes,
  # which find the build and write their own nccl.env (every rank must load the same NCCL: with
  # only the head's nccl.env, validate.yml's all-reduce mixed 2.29.7 and 2.28.9 ranks and did not return)
  mkdir -p "$(dirname "$(stage_val nccl_source)")"; cp "$XFER/$(basename "$(stage_val nccl_source)")" "$(stage_val nccl_source)"
  log "starting playbooks/nccl.yml in the background (log: $RES/nccl-role.log)"
  ( cd "$REPO" && PYTHONPATH=/root/gpu-ansible ANSIBLE_CONFIG="$REPO/ansible.cfg" \
      ANSIBLE_COLLECTIONS_PATH=/root/gpu-ac ANSIBLE_CACHE_PLUGIN=memory \
      setsid nohup bash -c 'py=$0 res=$1 inv=$2 head=$3
        play() { "$py" /root/gpu-ansible/bin/ansible-playbook playbooks/nccl.yml -i "$inv" --limit "$1" \
          -e ansible_become=false -e ansible_python_interpreter="$py" -e nccl_build_jobs=${NCCL_JOBS:-16}; }
        { play "$head" && { [[ $(ls -d /etc/llmfleet/nodes/*/ 2>/dev/null | wc -l) -lt 2 ]] || play "all:!$head"; }; } > "$res/nccl-role.log" 2>&1
        echo $? > "$res/nccl-role.rc"' "$PY" "$RES" "$INVENTORY" "$(stage_val host)" </dev/null >/dev/null 2>&1 & )
  sleep 2
}

unpack_parts() {  # $1 = folder with part.* + SHA256, $2 = target dir (gets site/)
  local src=$1 dir=$2 t0; t0=$(now)
  log "unpacking $src/part.* into $dir"
  (cd "$src" && cat part.* | sha256sum | awk '{print $1}') > "$RES/$(basename "$dir").sha256.actual"
  diff <(awk '{print $1}' "$src/SHA256") "$RES/$(basename "$dir").sha256.actual" || { log "bundle checksum mismatch"; return 1; }
  rm -rf "$dir/site"; mkdir -p "$dir"
  cat "$src"/part.* | xz -dc -T0 | tar xf - -C "$dir"
  log "unpacked in $("$PY" -c "print(round($(now) - $t0, 1))") s"
}

phase_unpack() {
  unpack_parts "$XFER" "$VLLM_BUNDLE" || return 1
  PYTHONPATH=$VLLM_BUNDLE/site "$PY" -c 'import vllm, ray; print("vllm", vllm.__version__, "ray", ray.__version__)' 2>&1 | tail -1 | tee "$RES/versions.txt"
}

phase_unpack_sglang() {
  unpack_parts "$XFER/sglang" "$SGLANG_BUNDLE" || return 1
  PYTHONPATH=$SGLANG_BUNDLE/site:$VLLM_BUNDLE/site "$PY" -c '
import importlib.metadata as m, sglang.srt.entrypoints.http_server, sgl_kernel, flashinfer, xgrammar, transformers, ray
print(" ".join("%s %s" % (p, m.version(p)) for p in ("sglang", "sglang-kernel", "flashinfer-python", "xgrammar", "transformers", "ray")))' \
    2>&1 | tail -3 | tee -a "$RES/versions.txt"
}

phase_assemble() {  # the carried parts of pack_carries.sh's one tar: extract every member that is whole yet
  ls "$XFER"/carry.* >/dev/null 2>&1 || { log "no carry.* parts in $XFER"; return 1; }
  local n; n=$(ls "$XFER"/carry.* | wc -l)
  (cd "$XFER" && cat carry.* | tar xf - 2>/dev/null) || log "assemble: $n part(s), the last member is not whole yet"
  if [[ -f $XFER/payload.sha256 ]]; then
    [[ $(cat "$XFER"/carry.* | sha256sum | awk '{print $1}') == $(cat "$XFER/payload.sha256") ]] && log "assemble: all $n parts, checksum ok" \
      || { log "assemble: payload checksum mismatch"; return 1; }
  fi
  ls -la "$XFER" "$XFER/models" 2>/dev/null | tee -a "$RES/run.log"
}

# The models of the emulated-node runs besides the tiny Llama (phase_model): a random-weight model of
# Llama-3.2-1B's shape (throughput that means something) and the real SmolLM2-135M-Instruct from the
# carried GGUF (an answer that means something: "Paris").
phase_models_real() {
  local user; user=$(stage_val service_user)
  if [[ ${MODELS_1B:-1} != 0 && ! -f /opt/llmfleet/models/llama-1b-shape/config.json ]]; then  # MODELS_1B=0: SmolLM2 only
    log "random-weight Llama-3.2-1B-shaped model"
    HF_HUB_OFFLINE=1 timeout 600 "$PY" "$REPO/roles/models/files/make_tiny_llama.py" /opt/llmfleet/models/llama-1b-shape \
      --hidden 2048 --layers 16 --heads 32 --kv-heads 8 --intermediate 8192 --vocab 1024 --max-pos 4096 >>"$RES/run.log" 2>&1
  fi
  if [[ ! -f /opt/llmfleet/models/smollm2-135m-instruct/config.json && -f $XFER/models/SmolLM2-135M-Instruct.Q4_1.gguf ]]; then
    log "SmolLM2-135M-Instruct from the carried GGUF"
    "$PY" -m pip install -q --no-index --no-deps --target /root/gpu-gguf "$XFER"/models/gguf-*.whl >>"$RES/run.log" 2>&1
    PYTHONPATH=/root/gpu-gguf timeout 300 "$PY" "$REPO/roles/models/files/gguf_to_hf.py" "$XFER/models/SmolLM2-135M-Instruct.Q4_1.gguf" \
      /opt/llmfleet/models/smollm2-135m-instruct >>"$RES/run.log" 2>&1 || log "SmolLM2 conversion failed"
  fi
  id "$user" >/dev/null 2>&1 && chown -R "$user" /opt/llmfleet/models
  du -sh /opt/llmfleet/models/* | tee -a "$RES/run.log"
}

# The real model answers a question with a known answer, through the collection's API (chat template applied).
phase_ask() {
  local url model; url=$(stage_val serve_url); model=$(stage_val served_model_name)
  curl -s --max-time 60 "$url/v1/chat/completions" -H 'Content-Type: application/json' -d '{"model": "'"$model"'",
    "messages": [{"role": "user", "content": "What is the capital of France? Answer in one word."}], "max_tokens": 16,
    "temperature": 0}' | tee "$RES/ask-$(mode_tag).json" | "$PY" -c 'import json,sys; a=json.load(sys.stdin)["choices"][0]["message"]["content"]; print("answer:", a); sys.exit(0 if "Paris" in a else 1)'
}

phase_model() {
  need_stage || return 1
  local model; model=$(stage_val model)
  [[ -f $model/config.json ]] || HF_HUB_OFFLINE=1 timeout 300 "$PY" "$REPO/roles/models/files/make_tiny_llama.py" "$model" --hidden 256 --layers 4 \
    --heads 4 --kv-heads 2 --vocab 1024 --max-pos 2048 >>"$RES/run.log" 2>&1
  id "$(stage_val service_user)" >/dev/null 2>&1 && chown -R "$(stage_val service_user)" "$model"
  ls -la "$model" | tee -a "$RES/run.log"
}

ray_up() {  # $1 = unit file (one host); emulated nodes: every node's own unit, the head first
  local unit=$1 h head_addr
  if ! multi; then
    log "Ray: unit_exec start $unit"
    "$PY" "$REPO/tests/gpu/unit_exec.py" start "$unit" --log "$RES/ray.log" --pidfile "$XFER/ray.pid" $(as_root_flag) | tee -a "$RES/run.log"
    return
  fi
  head_addr=$(stage_val ray_address)
  for h in $(nodes); do
    log "Ray on $h: unit_exec --node $h start (its stage's unit)"
    "$PY" "$REPO/tests/gpu/unit_exec.py" --node "$h" start "$XFER/stage/$h$(stage_val ray_unit)" --log "$RES/ray-$h.log" \
      --pidfile "$XFER/ray-$h.pid" $(as_root_flag) | tee -a "$RES/run.log"
    # the workers' units wait for the head's GCS in ExecStartPre=, which unit_exec.py does not run
    for _ in $(seq 1 60); do (exec 3<>"/dev/tcp/${head_addr%:*}/${head_addr#*:}") 2>/dev/null && break; sleep 1; done
    # one node at a time: raylets started within a second of each other on one machine failed to
    # bind ("Address already in use") or to register in time (16 cores); systemd would restart them
    sleep "${RAY_NODE_GAP:-10}"
  done
}

serve_up() {  # $1 = unit file, $2 = tag (emulated nodes: every node whose plan runs a unit, rank 0 last)
  local unit=$1 tag=$2 t0 rc h
  t0=$(now)
  if multi; then
    for h in $(nodes); do
      [[ $(node_val "$h" serve_runs_unit) == True && $h != $(stage_val host) ]] || continue
      "$PY" "$REPO/tests/gpu/unit_exec.py" --node "$h" start "$XFER/stage/$h$(stage_val serve_unit)" --log "$RES/serve-$tag-$h.log" \
        --pidfile "$XFER/serve-$h.pid" $(as_root_flag) | tee -a "$RES/run.log"
    done
    unit="$XFER/stage/$(stage_val host)$(stage_val serve_unit)"
  fi
  "$PY" "$REPO/tests/gpu/unit_exec.py" $(multi && echo --node "$(stage_val host)") start "$unit" --log "$RES/serve-$tag.log" --pidfile "$XFER/serve.pid" $(as_root_flag) | tee -a "$RES/run.log"
  "$PY" "$REPO/tests/gpu/validate_gpu.py" wait --url "$(stage_val serve_url)" --model "$(stage_val served_model_name)" \
    --since "$t0" --timeout "${SERVE_TIMEOUT:-400}" --pidfile "$XFER/serve.pid" | tee "$RES/healthy-$tag.json"
  rc=${PIPESTATUS[0]}
  [[ $rc == 0 ]] || { log "engine $tag not healthy; its log ends:"; tail -60 "$RES/serve-$tag.log"; }
  return $rc
}

audit_arg() { "$PY" -c "import json; d=json.load(open('$XFER/stage/stage.json'))['multicast_off_env']; print(','.join('%s=%s' % kv for kv in sorted(d.items())))"; }

serve_checks() {  # $1 = tag
  local tag=$1 raypids
  raypids=$(pgrep -f 'RayWorkerWrapper|ray::' | paste -sd, - || true)
  "$PY" "$REPO/tests/gpu/validate_gpu.py" serve --url "$(stage_val serve_url)" --model "$(stage_val served_model_name)" \
    --audit "$(audit_arg)" --audit-pids "$XFER/serve.pid" --extra-pids "$raypids" | tee "$RES/checks-$tag.json"
}

sweep() {  # $1 = tag
  local tag=$1
  log "sweep $tag"
  timeout "${SWEEP_TIMEOUT:-240}" "$(stage_val venv)/bin/python" "$REPO/playbooks/files/bench_serve_sweep.py" sweep --inproc --base-url "$(stage_val serve_url)" \
    --model "$(stage_val model)" --served-model-name "$(stage_val served_model_name)" \
    --concurrency "${SWEEP_CONC:-1,2,4,8,16,32}" --input-len 256 --output-len 128 --prompts-per-level 8 --min-prompts 16 \
    --num-warmups 4 --out-dir "$RES/sweep-$tag" --label "$tag" --plot --title "tiny Llama, 2x H200, $tag" \
    > "$RES/sweep-$tag.log" 2>&1; local rc=$?
  grep -E '^concurrency|wrote|Error|error' "$RES/sweep-$tag.log" | tail -12
  return $rc
}

stop_pid() { "$PY" "$REPO/tests/gpu/unit_exec.py" stop --pidfile "$1" --grace "${2:-20}"; }

phase_collection() {
  local ray_unit serve_unit
  log "waiting (at most ${NCCL_PRE_WAIT:-150} s) for the nccl role, so Ray and the engine start with its nccl.env"
  for _ in $(seq 1 "${NCCL_PRE_WAIT:-150}"); do [[ -f $RES/nccl-role.rc ]] && break; sleep 1; done
  [[ -f $RES/nccl-role.rc ]] && log "nccl role rc=$(cat "$RES/nccl-role.rc")" || log "nccl role still building: Ray and the engine start without nccl.env"
  ls -la /etc/llmfleet | tee -a "$RES/run.log"
  ray_unit="$XFER/stage$(stage_val ray_unit)"; serve_unit="$XFER/stage$(stage_val serve_unit)"
  ray_up "$ray_unit"
  log "Ray probe (the collection's ray_state PROBE, as the service user): GPUs and env audit"
  timeout 150 "$PY" "$REPO/tests/gpu/validate_gpu.py" ray --python "$(stage_val venv)/bin/python" --address "$(stage_val ray_address)" \
    --gpus 2 --run-as "$(run_as_user)" --audit "$(audit_arg)" --timeout 90 | tee "$RES/ray-probe.json"
  log "engine unit (TP=2 over Ray)"
  serve_up "$serve_unit" tp2 || return 1
  # a Ray client as the collection's own (Ray's authentication from a node's ray.env, the token file's path)
  env $(grep -hs '^RAY_AUTH_' "$(find /etc/llmfleet -name ray.env | head -1)" | tr -d '"') timeout 90 "$(stage_val venv)/bin/python" -c "
import ray, json; ray.init(address='$(stage_val ray_address)', logging_level='ERROR', log_to_driver=False)
print(json.dumps({'cluster_gpus': ray.cluster_resources().get('GPU'), 'available_gpus': ray.available_resources().get('GPU')}))" \
    2>/dev/null | tail -1 | tee "$RES/ray-in-use.json"
  serve_checks tp2
  sweep collection-tp2
  stop_pid "$XFER/serve.pid" 30
}

phase_single() {
  local unit; unit="$XFER/stage-tp1$(stage_val serve_unit)"
  install -m 0600 "$XFER"/stage-tp1/etc/llmfleet/llmfleet-serve-*.env /etc/llmfleet/
  log "engine unit rendered for TP=1 (one GPU)"
  serve_up "$unit" tp1 && serve_checks tp1
  stop_pid "$XFER/serve.pid" 30
  install -m 0600 "$XFER"/stage/etc/llmfleet/llmfleet-serve-*.env /etc/llmfleet/
}

phase_byhand() {  # the rendered vLLM unit's flags, started by hand (root, a plain shell env), same bench.yml
  local venv argv t0 rc tag gpus
  venv=$(stage_val venv); tag=$(mode_tag); gpus=$(stage_val "serve_plan['tensor_parallel_size']")
  phase_down
  log "by hand: ray start --head + vllm serve with the rendered flags, as root, a plain shell env"
  argv=$("$PY" -c "import json, shlex; print(' '.join(shlex.quote(a) for a in json.load(open('$XFER/stage/stage.json'))['serve_argv'][1:]))")
  (
    export PYTHONPATH=$(stage_val bundle_site) VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 RAY_ADDRESS=$(stage_val ray_address)
    "$venv/bin/ray" start --head --node-ip-address "$(stage_val "ray_address.split(':')[0]")" --port "$(stage_val "ray_address.split(':')[1]")" \
      --num-gpus "$gpus" --disable-usage-stats --include-dashboard=false > "$RES/byhand-ray.log" 2>&1
    echo "+ vllm $argv" >> "$RES/byhand-serve.log"
    t0=$(now); echo "$t0" > "$XFER/byhand.t0"
    eval "setsid nohup $venv/bin/vllm $argv" >> "$RES/byhand-serve.log" 2>&1 &
    echo $! > "$XFER/serve.pid"
  )
  "$PY" "$REPO/tests/gpu/validate_gpu.py" wait --url "$(stage_val serve_url)" --model "$(stage_val served_model_name)" \
    --since "$(cat "$XFER/byhand.t0")" --timeout 400 --pidfile "$XFER/serve.pid" | tee "$RES/healthy-byhand-$tag.json"
  rc=${PIPESTATUS[0]}
  [[ $rc == 0 ]] || { tail -60 "$RES/byhand-serve.log"; return 1; }
  bench_run "byhand-$tag"
  ansible_run playbooks/bench.yml -e '{"bench_compare": ["'"$RES/bench-$tag/sweep.csv"'", "'"$RES/bench-byhand-$tag/sweep.csv"'"]}' \
    -e bench_compare_labels=collection,by-hand -e bench_compare_out="$RES/compare-collection-vs-byhand-$tag.png" \
    -e bench_plot_python="$PY" > "$RES/compare-$tag.log" 2>&1 || tail -20 "$RES/compare-$tag.log"
  "$PY" - "$RES/bench-$tag/sweep.csv" "$RES/bench-byhand-$tag/sweep.csv" <<'PY' | tee "$RES/ratio-$tag.txt"
import csv, math, sys
a, b = ({int(r['concurrency']): float(r['output_throughput']) for r in csv.DictReader(open(p))} for p in sys.argv[1:3])
levels = sorted(set(a) & set(b))
ratios = [a[c] / b[c] for c in levels]
for c, r in zip(levels, ratios):
    print('concurrency %3d: collection %9.1f  by hand %9.1f  ratio %.3f' % (c, a[c], b[c], r))
print('geometric mean ratio %.3f (min %.3f)' % (math.exp(sum(map(math.log, ratios)) / len(ratios)), min(ratios)))
PY
  stop_pid "$XFER/serve.pid" 20; "$venv/bin/ray" stop --force >/dev/null 2>&1 || true
}

# Both engines of an A/B run: wait for B (by hand) and A (the collection, started as job $4), then
# ABBA blocks per level. $1 dir, $2 url A, $3 url B, $4 pid of A's start, $5 tag, $6 levels, $7 timeout.
ab_sweep() {
  local dir=$1 url_a=$2 url_b=$3 pid_a=$4 tag=$5 rc_a rc_b
  "$PY" "$REPO/tests/gpu/validate_gpu.py" wait --url "$url_b" --model "$(stage_val served_model_name)" \
    --since "$(cat "$XFER/byhand.t0")" --timeout 400 --pidfile "$XFER/byhand.pid" > "$dir/healthy-byhand.json"
  rc_b=$?; wait "$pid_a"; rc_a=$?
  cp "$RES/healthy-ab-collection-$tag.json" "$dir/healthy-collection.json" 2>/dev/null
  log "healthy: collection rc=$rc_a $(cat "$dir/healthy-collection.json" 2>/dev/null), by hand rc=$rc_b $(cat "$dir/healthy-byhand.json")"
  [[ $rc_a == 0 && $rc_b == 0 ]] || { tail -40 "$RES/serve-ab-collection-$tag.log" "$dir/byhand-serve.log"; return 1; }
  (cd "$XFER/stage" && cp -a --parents $(find . -path '*/etc/*' -type f) "$dir/") && mv "$dir/etc" "$dir/rendered-etc" 2>/dev/null
  log "ABBA blocks: collection (A, $url_a) vs by hand (B, $url_b)"
  timeout "$7" "$(stage_val venv)/bin/python" "$REPO/playbooks/files/bench_serve_sweep.py" ab --inproc \
    --base-url "$url_a" --base-url-b "$url_b" --labels collection,by-hand --blocks "${AB_BLOCKS:-4}" \
    --concurrency "$6" --model "$(stage_val model)" --served-model-name "$(stage_val served_model_name)" \
    --input-len 256 --output-len 128 --prompts-per-level 8 --min-prompts 16 --num-warmups 2 --out-dir "$dir" \
    > "$dir/ab.log" 2>&1; local rc=$?
  grep -vE '^\s*$' "$dir/ab.log" | grep -E 'block|ratio|geometric|Error|error' | tail -40
  return $rc
}

phase_ab() {
  local venv tag url_a url_b port_b dir pid_a rc rc_a rc_b argv
  venv=$(stage_val venv); tag=$(mode_tag); url_a=$(stage_val serve_url)
  port_b=$(( ${url_a##*:} + 1 )); url_b=${url_a%:*}:$port_b; dir=$OUT/ab-$tag
  mkdir -p "$dir"
  ray_up "$XFER/stage$(stage_val ray_unit)"
  serve_up "$XFER/stage$(stage_val serve_unit)" "ab-collection-$tag" > "$dir/collection-up.log" 2>&1 &
  pid_a=$!
  log "by hand, at the same time: its own Ray head (port 6479) + vllm serve with the rendered flags on port $port_b"
  argv=$("$PY" -c "import json, shlex; a = json.load(open('$XFER/stage/stage.json'))['serve_argv'][1:]
a[a.index('--port') + 1] = '$port_b'; print(' '.join(shlex.quote(x) for x in a))")
  (
    export PYTHONPATH=$(stage_val bundle_site) VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 RAY_ADDRESS=127.0.0.2:6479 \
      VLLM_CACHE_ROOT=/root/.cache/vllm-byhand
    "$venv/bin/ray" start --head --node-ip-address 127.0.0.2 --port 6479 --ray-client-server-port 11001 \
      --node-manager-port 6480 --object-manager-port 6481 --metrics-export-port 6482 --dashboard-agent-listen-port 6483 \
      --dashboard-agent-grpc-port 6484 --runtime-env-agent-port 6485 --min-worker-port 11002 --max-worker-port 11999 \
      --temp-dir /tmp/ray-byhand --num-gpus "$(stage_val "serve_plan['tensor_parallel_size']")" \
      --disable-usage-stats --include-dashboard=false > "$dir/byhand-ray.log" 2>&1
    echo "+ vllm $argv" > "$dir/byhand-serve.log"
    now > "$XFER/byhand.t0"
    eval "setsid nohup $venv/bin/vllm $argv" >> "$dir/byhand-serve.log" 2>&1 &
    echo $! > "$XFER/byhand.pid"
  )
  ab_sweep "$dir" "$url_a" "$url_b" "$pid_a" "$tag" "${AB_CONC:-4,32}" "${AB_TIMEOUT:-900}"; rc=$?
  stop_pid "$XFER/byhand.pid" 20; "$venv/bin/ray" stop --force >/dev/null 2>&1 || true
  phase_down
  return $rc
}

phase_metrics() {  # $1 = label: the engine's Prometheus metrics as they are now
  local label=${1:-$(mode_tag)} key
  key=$(stage_val "serve_plan.get('api_key', '')" 2>/dev/null)
  curl -s --max-time 10 "$(stage_val serve_url)/metrics" > "$RES/metrics-$label.txt" \
    && log "metrics $label: $(grep -c '^vllm:\|^sglang:' "$RES/metrics-$label.txt") engine series"
}

# The field notes' own commands for the emulated nodes (000: a `ray start` per node with the NCCL/Gloo
# socket variables exported, then `vllm serve ... --distributed-executor-backend ray` on the head), by
# hand as root, on loopback IPs 127.0.1.2.. and ports of their own, next to the collection's units.
byhand4_up() {  # $1 = dir for logs; sets nothing, writes $XFER/byhand.pid and $XFER/byhand.t0
  local dir=$1 venv argv k ip h n port_b
  venv=$(stage_val venv); n=$(nodes | wc -w)
  port_b=$(( $(stage_val "serve_url.rsplit(':', 1)[1]") + 1 ))
  argv=$("$PY" -c "import json, shlex; a = json.load(open('$XFER/stage/stage.json'))['serve_argv'][1:]
a[a.index('--port') + 1] = '$port_b'; a[a.index('--host') + 1] = '127.0.1.2'; print(' '.join(shlex.quote(x) for x in a))")
  k=0
  for h in $(nodes); do
    ip=127.0.1.$((2 + k)); b=$((41000 + 100 * k))
    if [[ $k == 0 ]]; then R="--head --port=6479 --include-dashboard=false --ray-client-server-port=11001"; else R="--address=127.0.1.2:6479"; fi
    ( export PYTHONPATH=$(stage_val bundle_site) HF_HUB_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
        NCCL_SOCKET_IFNAME=lo GLOO_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
        CUDA_VISIBLE_DEVICES=$(node_val "$h" "','.join(map(str, emulation['cuda_devices']))") NCCL_HOSTID=byhand-$h VLLM_HOST_IP=$ip
      "$venv/bin/ray" start $R --node-ip-address=$ip --num-gpus=1 --num-cpus=8 --object-store-memory=4000000000 \
        --node-manager-port=$b --object-manager-port=$((b + 1)) --runtime-env-agent-port=$((b + 2)) \
        --dashboard-agent-grpc-port=$((b + 3)) --dashboard-agent-listen-port=$((b + 4)) --metrics-export-port=$((b + 5)) \
        --min-worker-port=$((20000 + 2000 * k)) --max-worker-port=$((21999 + 2000 * k)) --temp-dir=/tmp/ray-byhand \
        --disable-usage-stats >> "$dir/byhand-ray.log" 2>&1 ) || log "by-hand ray start on $ip failed"
    k=$((k + 1))
  done
  echo "+ vllm $argv" > "$dir/byhand-serve.log"
  now > "$XFER/byhand.t0"
  ( export PYTHONPATH=$(stage_val bundle_site) HF_HUB_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 RAY_ADDRESS=127.0.1.2:6479 \
      NCCL_SOCKET_IFNAME=lo GLOO_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
      CUDA_VISIBLE_DEVICES=$(node_val "$(stage_val host)" "','.join(map(str, emulation['cuda_devices']))") \
      NCCL_HOSTID=byhand-$(stage_val host) VLLM_HOST_IP=127.0.1.2 VLLM_CACHE_ROOT=/root/.cache/vllm-byhand
    eval "setsid nohup $venv/bin/vllm $argv" >> "$dir/byhand-serve.log" 2>&1 &
    echo $! > "$XFER/byhand.pid" )
  echo "http://127.0.1.2:$port_b"
}

phase_ab4() {  # emulated nodes: the collection (A) against the notes' commands (B), both at once, ABBA
  local tag dir url_a url_b pid_a rc rc_a rc_b venv
  tag=$(mode_tag); dir=$OUT/ab-$tag; venv=$(stage_val venv); url_a=$(stage_val serve_url)
  mkdir -p "$dir"
  ray_up none
  serve_up none "ab-collection-$tag" > "$dir/collection-up.log" 2>&1 &
  pid_a=$!
  log "by hand, at the same time: the notes' ray start per node (127.0.1.x) + vllm serve"
  url_b=$(byhand4_up "$dir" | tail -1)
  ab_sweep "$dir" "$url_a" "$url_b" "$pid_a" "$tag" "${AB_CONC:-1,8,32}" "${AB_TIMEOUT:-420}"; rc=$?
  stop_pid "$XFER/byhand.pid" 20; RAY_TMPDIR=/tmp/ray-byhand "$venv/bin/ray" stop --force >/dev/null 2>&1 || true
  phase_down
  return $rc
}

phase_nccl() {
  log "waiting for the nccl role"
  for _ in $(seq 1 "${NCCL_WAIT:-300}"); do [[ -f $RES/nccl-role.rc ]] && break; sleep 1; done
  tail -25 "$RES/nccl-role.log"
  [[ -f $RES/nccl-role.rc ]] || { log "nccl role still running"; return 1; }
  cat /etc/llmfleet/nccl.env 2>/dev/null | tee "$RES/nccl.env"
  local lib; lib=$(stage_val nccl_library)
  local nodes_env="" h
  # emulated nodes: one rank per node with its own comm.env (sockets, NCCL_HOSTID); NVLink for reference
  multi && for h in $(nodes); do nodes_env+="${nodes_env:+,}$(node_val "$h" "env_files_plan['comm']")"; done
  local rounds=${NCCL_ROUNDS:-1} r
  for r in $(seq 1 "$rounds"); do
    log "all-reduce busbw, stock NCCL (the torch wheel's)${nodes_env:+, across the emulated nodes over sockets} (round $r)"
    MASTER_ADDR=127.0.0.2 "$PY" "$REPO/tests/gpu/allreduce_bw.py" --label stock --node-env-files "$nodes_env" --out "$RES/allreduce-stock-$r.json" | tail -1
    if [[ -f $lib ]]; then
      log "all-reduce busbw, built NCCL ($lib via LD_PRELOAD, as nccl.env hands it to the engine) (round $r)"
      MASTER_ADDR=127.0.0.2 LD_PRELOAD=$lib LD_LIBRARY_PATH=$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
        "$PY" "$REPO/tests/gpu/allreduce_bw.py" --label built --port 29544 --node-env-files "$nodes_env" --out "$RES/allreduce-built-$r.json" | tail -1
    fi
  done
  if [[ -n $nodes_env ]]; then
    log "reference: the same GPUs as one host (NVLink, P2P on), stock and built"
    "$PY" "$REPO/tests/gpu/allreduce_bw.py" --label stock-nvlink --port 29545 --out "$RES/allreduce-stock-nvlink.json" | tail -1
    [[ -f $lib ]] && LD_PRELOAD=$lib LD_LIBRARY_PATH=$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
      "$PY" "$REPO/tests/gpu/allreduce_bw.py" --label built-nvlink --port 29546 --out "$RES/allreduce-built-nvlink.json" | tail -1
  fi
}

phase_up() {
  local tag; tag=$(mode_tag)
  ray_up "$XFER/stage$(stage_val ray_unit)"
  log "engine unit $tag, as rendered on this host"
  # a second start of the same mode (compile caches warm) keeps the first one's numbers
  serve_up "$XFER/stage$(stage_val serve_unit)" "$tag$([[ -f $RES/healthy-$tag.json ]] && echo -again)" || return 1
  multi && grep -hoE "nRanks [0-9]+ nNodes [0-9]+ localRanks [0-9]+|Using network [A-Za-z]+|NET/Socket : Using \[[0-9]+\][a-z0-9]+|via NET/[A-Za-z]+" \
    "$RES"/serve-"$tag"*.log /var/lib/llmfleet/ray/session_latest/logs/worker*.out 2>/dev/null | sort | uniq -c | sort -rn | tee "$RES/nccl-lines-$tag.txt"
  # with Ray's token authentication (a node's ray.env names the token file) or the driver is refused
  env $(grep -hs '^RAY_AUTH_' "$(find /etc/llmfleet -name ray.env | head -1)" | tr -d '"') timeout 90 "$(stage_val venv)/bin/python" -c "
import ray, json; ray.init(address='$(stage_val ray_address)', logging_level='ERROR', log_to_driver=False)
print(json.dumps({'nodes': [n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']], 'cluster_gpus': ray.cluster_resources().get('GPU'),
                  'available_gpus': ray.available_resources().get('GPU', 0.0)}))" 2>/dev/null | tail -1 | tee "$RES/ray-in-use-$tag.json"
}

phase_validate() {
  log "playbooks/validate.yml (local connection, no systemd: unit_exec.py answers is-active/list-units)"
  local t0 tag dir; t0=$(now); tag=$(mode_tag); dir=$RES/validate-$tag
  mkdir -p "$dir"
  ansible_run playbooks/validate.yml -i "$INVENTORY" \
    -e '{"validate_systemctl": ["'"$PY"'", "'"$REPO"'/tests/gpu/unit_exec.py"'"$(multi && echo ', "--node", "{{ inventory_hostname }}"')"']}' \
    -e validate_report_dir="$dir" -e validate_report_raw="$dir/validate-raw.json" > "$dir/validate.log" 2>&1
  local rc=$?
  "$PY" -c "import json; print('\n'.join(json.load(open('$dir/validate.json'))['lines']))" 2>/dev/null || tail -40 "$dir/validate.log"
  grep -E 'PLAY RECAP' -A2 "$dir/validate.log"
  log "validate.yml ($tag) rc=$rc in $("$PY" -c "print(round($(now) - $t0, 1))") s"
  return $rc
}

bench_run() {  # $1 = label (results in $RES/bench-LABEL/)
  local label=$1 t0 rc; t0=$(now)
  log "playbooks/bench.yml $label (vllm bench serve per level from the head, CSV + PNG)"
  phase_metrics "$label-before"
  ansible_run playbooks/bench.yml -i "$INVENTORY" -e bench_plot_python="$PY" -e bench_results_dir="$RES/bench-$label" \
    -e bench_label="$label" -e bench_concurrency="${SWEEP_CONC:-1,2,4,8,16,32}" > "$RES/bench-$label.log" 2>&1
  rc=$?
  phase_metrics "$label-after"
  cp "$RES/metrics-$label-before.txt" "$RES/metrics-$label-after.txt" "$RES/bench-$label/" 2>/dev/null
  grep -E 'concurrency|wrote|sweep.csv|FAILED|fatal' "$RES/bench-$label.log" | tail -20
  grep -E 'PLAY RECAP' -A2 "$RES/bench-$label.log"
  log "bench.yml $label rc=$rc in $("$PY" -c "print(round($(now) - $t0, 1))") s"
  return $rc
}

phase_bench() { bench_run "$(mode_tag)"; }

phase_down() {  # then what the Ray unit's ExecStop= (`ray stop`) ends under systemd
  local f
  stop_pid "$XFER/serve.pid" 30
  for f in "$XFER"/serve-*.pid; do [[ -f $f ]] && stop_pid "$f" 20 && rm -f "$f"; done
  stop_pid "$XFER/ray.pid" 30
  for f in "$XFER"/ray-*.pid; do [[ -f $f ]] && stop_pid "$f" 30 && rm -f "$f"; done
  "$(stage_val venv)/bin/ray" stop --force >/dev/null 2>&1 || true
}

phase_pack() {
  tar czf "$OUT/results.tgz" -C "$(dirname "$RES")" "$(basename "$RES")" 2>/dev/null
  ls -la "$OUT"
}

for phase in "$@"; do
  log "=== phase $phase"
  "phase_$phase" || log "phase $phase FAILED (rc=$?)"
done
