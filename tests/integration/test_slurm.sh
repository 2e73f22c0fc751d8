#!/usr/bin/env bash
# tests/integration/test_slurm.sh ALLOCSIM SOURCE_DIR -- the Slurm recipe of
# docs/store.md on a one-node cluster started here: munged, slurmctld and
# slurmd on localhost with a configuration in a temporary directory; a
# 4-task job array of scripts/cluster/sweep-array.sbatch, its stores merged,
# must equal the unsharded sweep point for point.  Exit 77 (skipped, reason
# on stdout) only where the daemons cannot run: not installed, or not root.
set -euo pipefail
. "$(dirname "$0")/sweep_fixture.sh"
allocsim="$(realpath "$1")"
src="$(realpath "$2")"
for b in munged slurmctld slurmd sbatch sinfo scontrol; do
  command -v "$b" > /dev/null || PATH="$PATH:/usr/sbin"
  command -v "$b" > /dev/null || { echo "SKIP: $b is not installed (apt-get install slurm-wlm munge)"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "SKIP: starting munged and slurmd needs root"; exit 77; }

work="$(mktemp -d /tmp/allocsim-slurm.XXXXXX)"
chmod 755 "$work"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
node="$(hostname -s)"
port=$((17000 + RANDOM % 2000))

# munge: a key of our own and a socket in $work, so a running munged is untouched.
mkdir -p munge
mungekey --create --keyfile=munge/munge.key 2> /dev/null \
  || dd if=/dev/urandom of=munge/munge.key bs=1024 count=1 status=none
chmod 700 munge
chmod 400 munge/munge.key
munged --force --key-file=munge/munge.key --socket=munge/socket \
  --pid-file=munge/munged.pid --log-file=munge/munged.log --seed-file=munge/seed
socket="$work/munge/socket"
pids+=("$(cat munge/munged.pid)")

mkdir -p state spool
cat > slurm.conf <<CONF
ClusterName=allocsim-test
SlurmctldHost=$node
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool/%n
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
NodeName=$node CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$work/slurm.conf"
slurmctld -D -i -f "$SLURM_CONF" > slurmctld.out 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" > slurmd.out 2>&1 &
pids+=($!)

fail() {
  echo "$1"
  for f in munge/munged.log slurmctld.log slurmd.log slurmctld.out slurmd.out; do
    [ -s "$f" ] && { echo "== $f"; tail -20 "$f"; }
  done
  exit 1
}
for _ in $(seq 1 60); do
  state="$(sinfo -h -n "$node" -o %t 2> /dev/null || true)"
  [ "$state" = idle ] && break
  sleep 0.5
done
[ "$state" = idle ] || fail "the one-node Slurm cluster did not come up (node state '$state')"

write_sweep_spec sweep.spec
"$allocsim" sweep --spec sweep.spec --db whole.db --quiet > /dev/null

sbatch --wait --array=0-3 --export=ALL,SPEC=sweep.spec,ALLOCSIM="$allocsim" \
  "$src/scripts/cluster/sweep-array.sbatch" > sbatch.out \
  || fail "the job array failed: $(cat sbatch.out allocsim-sweep-*.out 2> /dev/null)"
"$allocsim" db merge merged.db part-0.db part-1.db part-2.db part-3.db > /dev/null

digest whole.db > whole.txt
digest merged.db > merged.txt
[ "$(wc -l < whole.txt)" -eq 36 ] || fail "unsharded: $(wc -l < whole.txt) points, expected 36"
diff -u whole.txt merged.txt || fail "the Slurm array's merged stores differ from the unsharded sweep"
hosts="$(sqlite3 merged.db "SELECT count(DISTINCT shard) FROM sweeps")"
[ "$hosts" -eq 4 ] || fail "merged store has $hosts shards, expected 4"
echo "ok: a 4-task Slurm array on $node, merged, equals the unsharded 36 points"
