#!/usr/bin/env bash
# The Slurm job array (scripts/slurm/) against a real Slurm: this test starts munge, slurmctld and slurmd of
# Debian's slurm-wlm on this machine - one node, this host, with its own configuration, key, ports, state and
# spool folders under a temporary folder - and stops them on exit. Then, on the CPU with the tiny weights:
#   1. sbatch --array=0-2 over 7 clips, one of them broken: every good clip's output exists and decodes to its
#      frame count, the broken one is `failed` in the manifest, every input has exactly one line, nothing else
#      is lost, and vaecodec-failed names the broken clip and the retry command;
#   2. the same into a new folder, task 0 cancelled (scancel) while it works on its second clip: no partial
#      or temporary file is left; re-submitted, the array produces exactly the missing outputs and leaves the
#      others untouched (same inode and modification time), reporting them as skipped.
# Usage: test_slurm_array.sh VAECODEC_BINARY WEIGHTS (CTest passes them; label "slurm").
set -euo pipefail
VAECODEC=$(realpath "$1")
WEIGHTS=$(realpath "$2")
ROOT=$(realpath "$(dirname "${BASH_SOURCE[0]}")/..")
SBATCH_SCRIPT=$ROOT/scripts/slurm/vaecodec-array.sbatch
FAILED_SCRIPT=$ROOT/scripts/slurm/vaecodec-failed

say() { echo "[slurm test] $*"; }
fail() {
  echo "[slurm test] FAILED: $*" >&2
  for log in "$work"/log/*.log "$work"/jobs/*.log; do
    [[ -f "$log" ]] && { echo "--- $log (last lines)" >&2; tail -n 15 "$log" >&2; }
  done
  exit 1
}

for tool in munged slurmctld slurmd sbatch squeue scancel scontrol sinfo ffmpeg ffprobe python3; do
  command -v "$tool" >/dev/null || { echo "[slurm test] FAILED: $tool is missing (scripts/setup.sh installs slurm-wlm, munge and ffmpeg)" >&2; exit 1; }
done

work=$(mktemp -d /tmp/vaecodec-slurm-XXXXXX)
chmod 755 "$work"
mkdir -p "$work"/{munge,state,spool,log,jobs,clips}
daemon_pids=()
cleanup() {
  set +e
  if [[ -f "$work/slurm.conf" ]] && ((${#daemon_pids[@]})); then
    scancel --quiet --user=root 2>/dev/null
    for _ in $(seq 50); do  # the tasks end before their slurmd
      [[ -z "$(squeue -h -o %i 2>/dev/null)" ]] && break
      sleep 0.2
    done
  fi
  for ((i = ${#daemon_pids[@]} - 1; i >= 0; i--)); do kill "${daemon_pids[i]}" 2>/dev/null; done
  for pid in "${daemon_pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT

# munge: a generated key, its own socket, pid, seed and log files (-f: run as root, paths under /tmp).
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge/munge.key"
munged -F -f --key-file="$work/munge/munge.key" --socket="$work/munge/munge.socket" \
  --pid-file="$work/munge/munged.pid" --seed-file="$work/munge/munged.seed" \
  --log-file="$work/log/munged.log" > "$work/log/munged.out" 2>&1 &
daemon_pids+=($!)
for _ in $(seq 50); do [[ -S "$work/munge/munge.socket" ]] && break; sleep 0.1; done
[[ -S "$work/munge/munge.socket" ]] || fail "munged did not start"

# Two free TCP ports for slurmctld and slurmd (another instance of this test may run beside this one).
read -r ctld_port slurmd_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
host=$(hostname)
node=$(hostname -s)
cluster=vc$$
cpus=$(nproc)
cat > "$work/slurm.conf" <<CONF
ClusterName=$cluster
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge/munge.socket
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
KillWait=30
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$work/slurm.conf
slurmctld -D -c > "$work/log/slurmctld.out" 2>&1 &
daemon_pids+=($!)
slurmd -D -N "$node" > "$work/log/slurmd.out" 2>&1 &
daemon_pids+=($!)
for _ in $(seq 100); do
  [[ "$(sinfo -h -o %T 2>/dev/null)" == idle ]] && break
  sleep 0.2
done
[[ "$(sinfo -h -o %T 2>/dev/null)" == idle ]] || fail "the node did not come up idle (sinfo: $(sinfo -h 2>&1))"
say "slurmctld and slurmd up: cluster $cluster, node $node, $cpus CPUs"

# 7 clips: a0-a6 sorted; task K of 3 takes a(K), a(K+3), a(K+6). a4 is broken (task 1); a3 is the second
# clip of task 0 and long enough to be cancelled while it runs.
declare -A frames=([a0]=5 [a1]=3 [a2]=4 [a3]=17 [a5]=2 [a6]=3)
for name in "${!frames[@]}"; do
  size=64x48
  [[ $name == a3 ]] && size=160x96  # a few seconds on one core
  ffmpeg -nostdin -loglevel error -f lavfi -i "testsrc2=size=$size:rate=24" -frames:v "${frames[$name]}" \
    -c:v libx264 -pix_fmt yuv420p "$work/clips/$name.mp4"
done
echo "not a video" > "$work/clips/a4.mp4"

export VAECODEC OMP_NUM_THREADS=1
args=(roundtrip "$work/clips/" --weights "$WEIGHTS" --device cpu --quiet)
# Submits the array over the clips into folder $1 with manifest $2; the remaining arguments go to sbatch.
submit() {
  local out=$1 manifest=$2
  shift 2
  VAECODEC_MANIFEST=$manifest sbatch --parsable --array=0-2 --gres=none --cpus-per-task=1 \
    --output="$work/jobs/%A_%a.log" "$@" "$SBATCH_SCRIPT" "${args[@]}" -o "$out/"
}
frame_count() {
  ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames -of csv=p=0 "$1"
}
# The manifest's lines as "input status" for clips, sorted.
statuses() {
  python3 -c '
import json, os, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(os.path.basename(r["input"]).split(".")[0], r["status"])' "$1" | sort
}
check_outputs_decode() {
  local out=$1
  shift
  for name in "$@"; do
    [[ -f "$out/$name.mp4" ]] || fail "$out/$name.mp4 is missing"
    local n
    n=$(frame_count "$out/$name.mp4") || fail "$out/$name.mp4 does not decode"
    [[ "$n" == "${frames[$name]}" ]] || fail "$out/$name.mp4 has $n frames, not ${frames[$name]}"
  done
}

# 1. The whole array.
start=$SECONDS
say "array 1: 3 tasks over 7 clips"
submit "$work/out1" "$work/m1.jsonl" --wait > "$work/job1" || true  # a task fails: the broken clip
check_outputs_decode "$work/out1" a0 a1 a2 a3 a5 a6
listing=$(cd "$work/out1" && ls -A | tr '\n' ' ')
[[ "$listing" == "a0.mp4 a1.mp4 a2.mp4 a3.mp4 a5.mp4 a6.mp4 " ]] || fail "out1 holds: $listing"
expected=$'a0 ok\na1 ok\na2 ok\na3 ok\na4 failed\na5 ok\na6 ok'
got=$(statuses "$work/m1.jsonl")
[[ "$got" == "$expected" ]] || fail "manifest 1 says: $got"
python3 - "$work/m1.jsonl" "$node" <<'PY' || fail "manifest 1's fields"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
for r in lines:
    assert r["host"].split(".")[0] == sys.argv[2], r
    assert r["shard"] in ("0/3", "1/3", "2/3"), r
    if r["status"] == "ok":
        assert r["device"] == "cpu" and r["frames"] > 0 and r["seconds"] > 0 and r["error"] is None, r
    else:
        assert "a4.mp4" in r["error"], r
PY
report=$("$FAILED_SCRIPT" "$work/m1.jsonl") && fail "vaecodec-failed found nothing failed"
grep -q "^failed: $work/clips/a4.mp4 on " <<<"$report" || fail "vaecodec-failed said: $report"
grep -q "^7 inputs in 7 manifest lines: 6 ok, 0 skipped, 1 failed" <<<"$report" || fail "vaecodec-failed said: $report"
grep -q "^retry: .*roundtrip .*--skip-existing$" <<<"$report" || fail "vaecodec-failed said: $report"
grep -q -- "--shard" <<<"$report" && fail "the retry command still shards: $report"
say "array 1 done in $((SECONDS - start)) s: 6 outputs decode, a4 failed"

# 2. Task 0 cancelled while it runs a3, its second clip. A batch commits a clip's output once the next clip's
# model work is done (Note [Batches]), so a0 is lost with a3: both temporary files are removed on SIGTERM.
start=$SECONDS
job=$(submit "$work/out2" "$work/m2.jsonl")
running_a3() { compgen -G "$work/out2/.a3.tmp-*" > /dev/null; }
for _ in $(seq 1200); do running_a3 && break; sleep 0.1; done
running_a3 || fail "task 0 did not start a3"
scancel "${job}_0"
for _ in $(seq 600); do [[ -z "$(squeue -h -j "$job" -o %i)" ]] && break; sleep 0.2; done
[[ -z "$(squeue -h -j "$job" -o %i)" ]] || fail "array 2 did not end"
state=$(scontrol show job "${job}_0" | sed -n 's/.*JobState=\([A-Z]*\).*/\1/p')
[[ "$state" == CANCELLED ]] || fail "task 0 is $state, not CANCELLED"
listing=$(cd "$work/out2" && ls -A | tr '\n' ' ')
[[ "$listing" == "a1.mp4 a2.mp4 a5.mp4 " ]] ||
  fail "after scancel out2 holds: $listing (expected a1 a2 a5 and no temporary file: a0 and a3 cancelled, a6 never started)"
check_outputs_decode "$work/out2" a1 a2 a5
got=$(statuses "$work/m2.jsonl")
[[ "$got" == $'a1 ok\na2 ok\na4 failed\na5 ok' ]] || fail "manifest 2 after scancel says: $got"
before=$(cd "$work/out2" && stat -c '%n %i %y' a1.mp4 a2.mp4 a5.mp4)
lines_before=$(wc -l < "$work/m2.jsonl")

submit "$work/out2" "$work/m2.jsonl" --wait > /dev/null || true
check_outputs_decode "$work/out2" a0 a1 a2 a3 a5 a6
listing=$(cd "$work/out2" && ls -A | tr '\n' ' ')
[[ "$listing" == "a0.mp4 a1.mp4 a2.mp4 a3.mp4 a5.mp4 a6.mp4 " ]] || fail "after re-submission out2 holds: $listing"
after=$(cd "$work/out2" && stat -c '%n %i %y' a1.mp4 a2.mp4 a5.mp4)
[[ "$before" == "$after" ]] || fail "outputs that existed were rewritten: $before / $after"
got=$(tail -n +"$((lines_before + 1))" "$work/m2.jsonl" > "$work/m2-resumed.jsonl"; statuses "$work/m2-resumed.jsonl")
[[ "$got" == $'a0 ok\na1 skipped\na2 skipped\na3 ok\na4 failed\na5 skipped\na6 ok' ]] ||
  fail "the re-submitted array's manifest lines say: $got"
grep -q "^vaecodec: skipped .*a1.mp4" "$work"/jobs/*.log || fail "no skipped line in the tasks' logs"
say "array 2 done in $((SECONDS - start)) s: task 0 cancelled, re-submitted, only a0, a3 and a6 produced"
say "passed"
