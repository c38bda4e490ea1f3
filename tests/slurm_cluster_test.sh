#!/bin/bash
# A real Slurm on one host (#32): munged, slurmctld and two slurmd (nodes
# whose names resolve nowhere, as on clusters that set NodeAddr, so the job
# must take node 0's address from Slurm; their own ports and spool folders
# under a temporary folder), a CPU-only partition. Submits a 2-node demo
# job with `launcher sbatch` (its text must be the single-node run's) and a
# failing 2-node job (it must end within seconds: srun --kill-on-bad-exit),
# then stops every daemon it started. Skips, saying why, without root or
# Debian's slurm-wlm and munge packages. Also: a launcher run as the batch
# script itself (sbatch --wrap) is a one-node launcher, not a node of an
# srun step; a `-- serve` job answers HTTP, and scancel ends it with no
# process left behind; a `-- serve --data_parallel_size=2` job serves
# through node 0's port with a replica on each node.
set -u
# A skip is a skipped case in the test's XML, so CI counts it with its reason.
skip() {
  echo "SKIPPED: $*"
  if [ -n "${XML_OUTPUT_FILE:-}" ]; then
    printf '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites><testsuite name="slurm_cluster_test" tests="1" skipped="1"><testcase name="RealSlurm" result="skipped"><skipped message="%s"/></testcase></testsuite></testsuites>\n' "$*" >"$XML_OUTPUT_FILE"
  fi
  exit 0
}
[ "$(id -u)" = 0 ] || skip "needs root (slurmd runs jobs as root here)"
for tool in munged slurmctld slurmd sbatch squeue scontrol; do
  command -v "$tool" >/dev/null || skip "$tool not installed (apt-get install slurm-wlm munge)"
done
host="$(hostname -s)"
getent hosts "$host" >/dev/null || skip "this host's name $host does not resolve"
n0=llamaslurm0 n1=llamaslurm1  # Node names; NodeAddr is how Slurm reaches them.
getent hosts "$n0" >/dev/null && skip "$n0 resolves here: the test needs node names that do not"

T="$(mktemp -d /tmp/llama-slurm-XXXXXX)"  # Short: the munge socket path must fit a sockaddr_un.
pids=()  # Every daemon started (slurmctld and slurmd: from their pid files at the end).
cleanup() {
  for pidfile in "$T"/run/*.pid; do [ -f "$pidfile" ] && pids+=("$(cat "$pidfile")"); done
  [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
  for i in $(seq 20); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.5
  done
  [ ${#pids[@]} -gt 0 ] && kill -9 "${pids[@]}" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAILED: $*"; for f in "$T"/log/*.log; do echo "== $f"; tail -20 "$f"; done; exit 1; }

runfiles="${TEST_SRCDIR:-$PWD/..}/llama2_cpp"
mkdir -p "$T/bin" "$T/state" "$T/spool/$n0" "$T/spool/$n1" "$T/munge" "$T/log" "$T/run" "$T/home" "$T/jobs"
cp "$runfiles/launcher/launcher" "$runfiles/worker/worker" "$T/bin/"
# The cluster's own ports, below the 20000-31999 that the launcher derives
# from job ids (20000 + id % 12000): a random base among those once gave
# slurmd the port of the serve job's rendezvous (base + 1 = 20000 + its id).
base=$((10000 + RANDOM % 9000))
cat > "$T/slurm.conf" <<CONF
ClusterName=llamatest
# The launcher's job port follows the job id: two test clusters on one host
# (runs side by side) must not both start at job 1.
FirstJobId=$((1 + RANDOM % 10000))
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/munge.socket
SlurmctldPort=$base
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool/%n
SlurmctldPidFile=$T/run/slurmctld.pid
SlurmdPidFile=$T/run/slurmd-%n.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
InactiveLimit=0
KillWait=5
NodeName=$n0 NodeHostname=$n0 NodeAddr=127.0.0.1 Port=$((base + 1)) CPUs=2 RealMemory=2000
NodeName=$n1 NodeHostname=$n1 NodeAddr=127.0.0.1 Port=$((base + 2)) CPUs=2 RealMemory=2000
PartitionName=cpu Nodes=$n0,$n1 Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$T/slurm.conf" HOME="$T/home"
head -c 1024 /dev/urandom > "$T/munge/munge.key"
chmod 700 "$T/munge"; chmod 400 "$T/munge/munge.key"
munged --force --key-file="$T/munge/munge.key" --socket="$T/munge/munge.socket" --pid-file="$T/munge/munged.pid" \
  --log-file="$T/log/munged.log" --seed-file="$T/munge/seed" || fail "munged did not start"
pids+=("$(cat "$T/munge/munged.pid")")
slurmctld -f "$T/slurm.conf" || fail "slurmctld did not start"
sleep 1
slurmd -f "$T/slurm.conf" -N "$n0" || fail "slurmd $n0 did not start"
slurmd -f "$T/slurm.conf" -N "$n1" || fail "slurmd $n1 did not start"
for i in $(seq 30); do
  [ "$(sinfo -h -o %T -p cpu 2>/dev/null | sort -u)" = idle ] && break
  sleep 1
done
[ "$(sinfo -h -o %T -p cpu | sort -u)" = idle ] || fail "nodes not idle: $(sinfo)"

# The single-node text, which also makes the demo checkpoint.
"$T/bin/launcher" --nproc_per_node=2 > "$T/local.out" 2> "$T/local.err" || fail "local demo: $(cat "$T/local.err")"

wait_for() {  # job id, seconds: its final state
  for i in $(seq "$2"); do
    squeue -h -j "$1" 2>/dev/null | grep -q . || break
    sleep 1
  done
  scontrol show job "$1" | sed -n 's/.*JobState=\([A-Z]*\).*/\1/p'
}

# scancel ends a server job, and no worker or launcher of ours outlives it.
cancel_leaving_nothing() {  # job id
  scancel "$1"
  local state
  state="$(wait_for "$1" 60)"
  [ "$state" = CANCELLED ] || fail "job $1 after scancel: $state"
  sleep 2
  if pgrep -f "$T/bin/(worker|launcher)" > /dev/null; then
    fail "processes left after scancel: $(pgrep -a -f "$T/bin/(worker|launcher)")"
  fi
}

cd "$T/jobs"
# A 2-node job on a partition without GPUs: 2 workers per node.
"$T/bin/launcher" sbatch --nodes=2 --nproc_per_node=2 --launcher_path="$T/bin/launcher" > submit.out 2> submit.err ||
  fail "launcher sbatch: $(cat submit.err)"
grep -q -- '--gpus-per-node' submit.out && fail "a gres line in a CPU job's script"
job="$(tail -n1 submit.out)"
[ "$(wait_for "$job" 90)" = COMPLETED ] || fail "job $job: $(cat llama2-$job.out)"
grep '^0: ' "llama2-$job.out" | sed 's/^0: \{0,1\}//' | grep -v '^launcher:\|^convert\|^verify\|^          the\|^$' > job.text
diff <(grep -v '^$' "$T/local.out") job.text || fail "the 2-node text differs from the single-node one"
echo "PASS: 2-node job $job gives the single-node text"

# A job that fails on the nodes (what submission cannot see: the KV cache
# does not fit their memory): both nodes' launchers end at once (the step is
# killed on the first bad exit), not after --rendezvous_timeout.
"$T/bin/launcher" sbatch --nodes=2 --nproc_per_node=1 --launcher_path="$T/bin/launcher" -- \
  --kv_cache_gb=100000 > fail.out 2> fail.err || fail "launcher sbatch: $(cat fail.err)"
job="$(tail -n1 fail.out)"
start=$SECONDS
[ "$(wait_for "$job" 60)" = FAILED ] || fail "job $job did not fail: $(cat llama2-$job.out)"
[ $((SECONDS - start)) -lt 30 ] || fail "the failing job took $((SECONDS - start)) s"
grep -q "the KV cache (100000.00 GB" "llama2-$job.out" || fail "job $job's error: $(cat llama2-$job.out)"
echo "PASS: failing job $job ended FAILED in $((SECONDS - start)) s"

# The batch script itself (no srun step): a plain one-node launcher, on -N1
# and -N2 alike (SLURM_PROCID is set there too; SLURM_STEP_ID tells).
for nodes in 1 2; do
  job="$(sbatch --parsable -N "$nodes" -o "wrap-%j.out" --wrap "'$T/bin/launcher' --nproc_per_node=2")" ||
    fail "sbatch --wrap"
  [ "$(wait_for "$job" 90)" = COMPLETED ] || fail "wrap job $job (-N$nodes): $(cat "wrap-$job.out")"
  grep -q "2 rank(s) on 1 node(s)" "wrap-$job.out" || fail "wrap job $job (-N$nodes): $(cat "wrap-$job.out")"
done
echo "PASS: sbatch --wrap runs a one-node launcher on -N1 and -N2"

# A server job: it answers, and scancel ends it with no worker left.
port=$((base + 10))
"$T/bin/launcher" sbatch --nodes=1 --nproc_per_node=2 --launcher_path="$T/bin/launcher" -- serve --port="$port" \
  > serve.out 2> serve.err || fail "launcher sbatch -- serve: $(cat serve.err)"
job="$(tail -n1 serve.out)"
answered=""
for i in $(seq 90); do
  if curl -sf "http://127.0.0.1:$port/health" > /dev/null 2>&1; then answered=yes; break; fi
  sleep 1
done
[ -n "$answered" ] || fail "serve job $job never answered on port $port: $(cat "llama2-$job.out" 2>/dev/null)"
curl -sf "http://127.0.0.1:$port/v1/models" | grep -q '"object"' || fail "serve job $job: /v1/models"
cancel_leaving_nothing "$job"
echo "PASS: serve job $job answered, and scancel left no process"

# Replicas across nodes (launcher serve --data_parallel_size): one on each
# node behind node 0's port, both answering through it; scancel ends both
# nodes with no process left.
port=$((base + 11))
"$T/bin/launcher" sbatch --nodes=2 --nproc_per_node=1 --launcher_path="$T/bin/launcher" -- serve --port="$port" \
  --data_parallel_size=2 --routing=round_robin > replicas.out 2> replicas.err ||
  fail "launcher sbatch -- serve --data_parallel_size=2: $(cat replicas.err)"
job="$(tail -n1 replicas.out)"
health=""
for i in $(seq 120); do
  health="$(curl -s "http://127.0.0.1:$port/health" 2>/dev/null)"
  [[ "$health" == *'"replicas_up":2'* ]] && break
  sleep 1
done
[[ "$health" == *'"status":"ok"'* ]] || fail "replicas job $job: /health $health: $(cat "llama2-$job.out" 2>/dev/null)"
for i in 1 2 3 4; do
  curl -sf "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model": "demo", "prompt": "Hello", "max_tokens": 4, "temperature": 0}' | grep -q '"completion_tokens":4' ||
    fail "replicas job $job: completion $i"
done
metrics="$(curl -s "http://127.0.0.1:$port/metrics")"
for replica in 0 1; do
  grep -q "^llama_router_requests_total{replica=\"$replica\",by=\"load\"} 2\$" <<<"$metrics" ||
    fail "replicas job $job: replica $replica did not answer 2 of 4: $(grep router_requests <<<"$metrics")"
done
cancel_leaving_nothing "$job"
echo "PASS: replicas job $job served through one endpoint with a replica per node, and scancel left no process"

# What the nodes would refuse after the queue wait is refused at submission.
mkdir -p "$T/empty"
"$T/bin/launcher" sbatch --nodes=2 --launcher_path="$T/bin/launcher" -- --ckpt_dir="$T/empty" --prompt=hi \
  > refused.out 2> refused.err && fail "sbatch took a job whose checkpoint has no tokenizer"
grep -q "no tokenizer.model in or next to $T/empty" refused.err || fail "refusal: $(cat refused.err)"
echo "PASS: a job the nodes would refuse is refused at submission"
