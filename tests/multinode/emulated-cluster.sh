#!/usr/bin/env bash
# emulated-cluster.sh — runs zt-launch on an emulated cluster of K nodes on this machine
# (network namespaces joined by a bridge, see cluster.sh) and removes the cluster afterwards.
#
#   emulated-cluster.sh [--nodes K] [--slots S] [--rate RATE] [--delay DELAY]
#                       [--tx-report FILE] -- ZT_LAUNCH_ARGS...
#   emulated-cluster.sh --probe      exit 0 when a cluster can be built here, else 77 and why
#   emulated-cluster.sh --cleanup    remove what a killed run left behind, and exit
#
# The launch runs on node0 as it would on a cluster's first node:
#   zt-launch --hostfile H --mca plm_rsh_agent rsh-agent.sh --mca {oob,btl}_tcp_if_include 10.77.0.0/24
#             --mca btl tcp,self,vader --mca plm_rsh_no_tree_spawn 1 ZT_LAUNCH_ARGS...
# with H = "node<i> slots=S" for i < K, so ranks 0..S-1 are on node0, S..2S-1 on node1, ...
#
# --rate RATE    limit what leaves each node (tc tbf, e.g. 1gbit, 20mbit)
# --delay DELAY  delay what leaves each node (tc netem, e.g. 2ms); without netem in the kernel
#                the run goes on undelayed and says so
# --tx-report F  bytes each node sent (its eth0 tx_bytes) during each training step, as JSON
#                lines in F and a table on stderr; needs `--metrics PATH` in the train arguments
#
# Exit code: the job's (zt-launch/mpirun); 2 for bad arguments or a cluster that could not be
# built; 77 when this machine cannot build one (no privilege for namespaces), with the reason.
set -u
HERE=$(dirname "$(readlink -f "$0")")
REPO=$(dirname "$(dirname "$HERE")")
. "$HERE/cluster.sh"

EXIT_BAD_INPUT=2
EXIT_SKIP=77

die() {
  echo "emulated-cluster: error: $*" >&2
  exit $EXIT_BAD_INPUT
}
note() { echo "emulated-cluster: $*" >&2; }

nodes=2 slots=2 rate="" delay="" tx_report="" mode=run
while [ $# -gt 0 ]; do
  case $1 in
    --nodes) nodes=${2:-}; shift 2 || die "--nodes needs a value" ;;
    --slots) slots=${2:-}; shift 2 || die "--slots needs a value" ;;
    --rate) rate=${2:-}; shift 2 || die "--rate needs a value" ;;
    --delay) delay=${2:-}; shift 2 || die "--delay needs a value" ;;
    --tx-report) tx_report=${2:-}; shift 2 || die "--tx-report needs a value" ;;
    --probe) mode=probe; shift ;;
    --cleanup) mode=cleanup; shift ;;
    --) shift; break ;;
    *) die "unknown option '$1' (put the zt-launch arguments after --)" ;;
  esac
done
if ! [[ $nodes =~ ^[0-9]+$ ]] || ((nodes < 1 || nodes > 200)); then
  die "--nodes '$nodes': expected 1 to 200"
fi
if ! [[ $slots =~ ^[0-9]+$ ]] || ((slots < 1)); then
  die "--slots '$slots': expected a number of ranks >= 1"
fi
[[ -z $rate || $rate =~ ^[0-9.]+[kmg]?(bit|bps)$ ]] || die "--rate '$rate': expected a tc rate such as 1gbit or 20mbit"
[[ -z $delay || $delay =~ ^[0-9.]+(us|ms|s)$ ]] || die "--delay '$delay': expected a tc time such as 2ms"

if ! reason=$(zt_cluster_probe); then
  note "SKIP: cannot build an emulated cluster here: $reason"
  exit $EXIT_SKIP
fi
[ $mode = probe ] && exit 0
[ $mode = run ] && [ $# -eq 0 ] && die "no zt-launch arguments after -- (e.g. -- train --config ...)"

metrics=""
if [ -n "$tx_report" ]; then
  args=("$@")
  for ((i = 0; i + 1 < ${#args[@]}; i++)); do
    [ "${args[$i]}" = --metrics ] && metrics=${args[$((i + 1))]}
  done
  [ -n "$metrics" ] || die "--tx-report needs the train arguments to include --metrics PATH (steps are read from it)"
fi

# One cluster at a time: a second run would sweep the first one's namespaces. fd 9 is closed in
# every child so that processes left by a killed run never hold the lock.
exec 9>"$ZT_MN_LOCK" || die "cannot open the lock file $ZT_MN_LOCK"
if ! flock -n 9; then
  note "waiting for another emulated cluster to finish (lock $ZT_MN_LOCK)"
  flock -w 600 9 || die "another emulated cluster held $ZT_MN_LOCK for 600 s"
fi

leftovers=$(ip netns list | awk '{print $1}' | grep "^${ZT_MN_PREFIX}-" | tr '\n' ' ')
if [ -n "$leftovers" ] || ip link show "$ZT_MN_BRIDGE" >/dev/null 2>&1; then
  note "removing what an earlier run left behind: ${leftovers:-}${ZT_MN_BRIDGE}"
fi
zt_cluster_sweep
[ $mode = cleanup ] && exit 0

job="" monitor="" workdir=""
cleanup() {
  local rc=$?
  trap '' INT TERM
  [ -n "$job" ] && kill -TERM "$job" 2>/dev/null
  [ -n "$monitor" ] && kill -TERM "$monitor" 2>/dev/null && wait "$monitor" 2>/dev/null
  zt_cluster_sweep # also every process still inside a node
  [ -n "$workdir" ] && rm -rf "$workdir"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -n "$delay" ] && reason=$(zt_netem_missing); then
  note "--delay $delay is unavailable: $reason; the links are not delayed"
  delay=""
fi
zt_cluster_up "$nodes" "$rate" "$delay" 9>&- || die "could not build the emulated cluster (see above)"
addrs=$(for ((i = 0; i < nodes; i++)); do printf ' %s=%s' "$(zt_node_name "$i")" "$(zt_node_addr "$i")"; done)
note "$nodes nodes x $slots ranks on bridge $ZT_MN_BRIDGE:$addrs; outgoing link per node:" \
  "${rate:-unlimited rate}, ${delay:-no added delay}"

workdir=$(mktemp -d /tmp/${ZT_MN_PREFIX}-run.XXXXXX)
for ((i = 0; i < nodes; i++)); do
  echo "$(zt_node_name "$i") slots=$slots"
done >"$workdir/hostfile"

if [ -n "$tx_report" ]; then
  rm -f "$metrics" # the run writes it anew; lines of an older run would be read as steps
  python3 "$HERE/tx_per_step.py" --metrics "$metrics" --nodes "$nodes" --out "$tx_report" 9>&- &
  monitor=$!
fi

# MCA defaults for the emulated cluster; a `--mca KEY VALUE` in the zt-launch arguments replaces
# the default for KEY (mpirun refuses a key given twice).
subnet=${ZT_MN_SUBNET}.0/24
declare -A mca=([plm_rsh_agent]="$HERE/rsh-agent.sh" [plm_rsh_no_tree_spawn]=1 [oob_tcp_if_include]="$subnet"
  [btl_tcp_if_include]="$subnet" [btl]="tcp,self,vader")
args=("$@")
for ((i = 0; i + 1 < ${#args[@]}; i++)); do
  [ "${args[$i]}" = --mca ] && unset "mca[${args[$((i + 1))]}]"
done
defaults=()
for key in plm_rsh_agent plm_rsh_no_tree_spawn oob_tcp_if_include btl_tcp_if_include btl; do
  [ -n "${mca[$key]+set}" ] && defaults+=(--mca "$key" "${mca[$key]}")
done
zt_node_exec 0 "$REPO/launcher/zt-launch" --hostfile "$workdir/hostfile" "${defaults[@]}" "$@" 9>&- &
job=$!
wait "$job"
rc=$?
job=""
exit $rc
