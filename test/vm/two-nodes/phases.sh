# The scenario phases of node.sh (sourced; POSIX sh), run in step on both nodes:
#   a. the agent from its image as the rendered DaemonSet's pod (kubelet stand-in), registered;
#   e. pod-netns layouts on real CNI, fresh nodes (no SMC-R link group yet): bridge, then ipvlan;
#   c. the SMC-R journey with hostNetwork pods, node 1 -> node 2, 64 MiB, vs plain TCP (16 MiB);
#   d. negative control: a server pod without the annotation;
#   b. (node 1) the NCCL pod after mutate: device nodes and NCCL env in its runc container, then
#      a pod removed while its PreStartContainer runs;
#   f. faults: containerd restarted after SIGTERM (node 2, at the same time as b) and after
#      SIGKILL (node 1, after b), the agent's container restarted (node 2).
# Under TCG each node has one emulated CPU, so work is split between the nodes wherever the
# phases allow: the two VMs run side by side on the host's cores.
# The pod-netns layouts run before any node-to-node SMC-R connection: a pod in the node subnet
# joins an existing node link group, which would prove nothing about the layout.
KUBELET=$SRC/test/node/kubelet.py
KJ="$PY $HERE/kjson.py"
KS=/run/kubelet-standin
AGENT_POD=erdma-system/erdma-agent-node$ME
PRESTART=$W/prestart-ms.txt
: > "$PRESTART"
rxe_counter() { cat "/sys/class/infiniband/rxe0/ports/1/hw_counters/$1" 2> /dev/null || echo 0; }

# k NAME SECONDS ARGS...: kubelet.py ARGS, JSON answer in $W/NAME.json, its log in $W/NAME.err
k() {
  kname=$1
  ksecs=$2
  shift 2
  timeout -s KILL "$ksecs" "$PY" "$KUBELET" "$@" > "$W/$kname.json" 2> "$W/$kname.err"
  krc=$?
  [ "$krc" = 0 ] || { log "    kubelet.py $1 ($kname): exit $krc"; tail -5 "$W/$kname.err" | sed "s/^/    $kname| /"; }
  return $krc
}
# run_pod NAME FILE [ARGS...]: run-pod --name NAME; records its PreStartContainer latency
run_pod() {
  rp=$1
  rf=$2
  shift 2
  # the stand-in's --name selects a pod by name; the same file runs under several names here
  sed "s/^  name: .*/  name: $rp/" "$PODS/$rf" > "$W/$rp.yaml"
  k "pod-$rp" 240 run-pod -f "$W/$rp.yaml" --state "$KS" "$@" || return 1
  # one python start for what the checks read later (python costs seconds under TCG)
  $KJ get "$W/pod-$rp.json" '"%s %s %s" % (d.get("pod_ip") or "-", d.get("netns") or "-", ",".join(str(c["prestart_ms"]) for c in d["containers"].values() if c.get("prestart_ms") is not None) or "-")' > "$W/$rp.fields"
  read -r rp_ip rp_ns rp_ms < "$W/$rp.fields"
  [ "$rp_ms" != - ] && echo "$rp_ms" | tr ',' '\n' >> "$PRESTART"
  log "    pod $rp: ip $rp_ip, netns $rp_ns, PreStartContainer $rp_ms ms"
}
pod_ip() { cut -d' ' -f1 "$W/$1.fields"; }
pod_ns() { cut -d' ' -f2 "$W/$1.fields"; }
# in_agent NAME ARGS...: erdma-agent ARGS in the agent's container (ExecSync); stdout in $W/NAME.out
in_agent() {
  ia=$1
  shift
  k "$ia" 60 exec --state "$KS" "$AGENT_POD" agent -- /usr/bin/erdma-agent "$@"
  iarc=$?
  $KJ stdout "$W/$ia.json" > "$W/$ia.out" 2> /dev/null
  return $iarc
}
# bulk_log POD: the tcp-bulk JSON line of the pod's container log, read from the CRI log file
# kubelet's layout gives it (/var/log/pods/NS_NAME_UID/CONTAINER/N.log: "TIME stdout F LINE")
bulk_log() { cat /var/log/pods/team-a_"$1"_*/bulk/*.log 2> /dev/null | awk '$2 == "stdout" && $4 ~ /^\{/ {print $4}' | tail -1; }
bulk_ok() {  # POD BYTES: the client's log says BYTES arrived with a matching checksum
  bulk_log "$1" > "$W/$1.bulk"
  $KJ get "$W/$1.bulk" 'd["bytes"] == '"$2"' and d["match"] is True' | grep -qx True
}
wait_bulk() {  # POD SECONDS: until the client's container log has its JSON answer
  wb_end=$(($(cut -d. -f1 /proc/uptime) + $2))
  while [ "$(cut -d. -f1 /proc/uptime)" -lt "$wb_end" ]; do
    bulk_log "$1" > "$W/$1.bulk" 2> /dev/null && [ -s "$W/$1.bulk" ] && return 0
    sleep 0.5
  done
  return 1
}
pod_netns_configured() {  # POD: PreStartContainer's pnet entry eth0 -> ERDMA in the pod's netns
  in_agent "pnet-$1" pnet list --netns "$(pod_ns "$1")" &&
    grep -qE '^ERDMA +eth +eth0 ' "$W/pnet-$1.out"
}
pod_configured_host() {  # POD: the same, read with the node's erdma-agent (cheaper under TCG)
  "$AGENT" pnet list --netns "$(pod_ns "$1")" | grep -qE '^ERDMA +eth +eth0 '
}
pod_sysctls() {  # POD: net.smc.wmem and rmem in the pod's netns (the node's view of it)
  [ "$(nsenter --net="$(pod_ns "$1")" cat /proc/sys/net/smc/wmem /proc/sys/net/smc/rmem | tr '\n' ' ')" = "262144 262144 " ]
}
# tcp-bulk and sleep run as PID 1 without a SIGTERM handler, so a stop waits out the grace period
agent_log() { cat /var/log/pods/erdma-system_erdma-agent-node"$ME"_*/agent/*.log 2> /dev/null; }
agent_metrics() {  # the agent's /metrics (hostNetwork, metricsListen 127.0.0.1:9467)
  $PY -c 'import sys, urllib.request as u; sys.stdout.write(u.urlopen("http://127.0.0.1:9467/metrics", timeout=5).read().decode())' 2> /dev/null
}
predictions_logged() { agent_metrics | grep -qx 'erdma_agent_smcr_pod_predictions_pending 0'; }
delete_pod() { k "del-$1" 120 delete-pod "team-a/$1" --grace 2 --state "$KS" > /dev/null; }
# Pods of finished phases stay until the VM powers off, except the layout pods (deleted before the
# CNI config changes, so the hostNetwork SMC-R journey runs on nodes without them) and the pod the
# removal race is about: a delete costs about 7 s of the node's one emulated CPU on a fast machine,
# and no later check depends on a pod being gone.

if [ ! -f "$KUBELET" ]; then
  fail "test/node/kubelet.py (the kubelet stand-in) is not in this tree: no pod phase can run"
  return 0 2> /dev/null || exit 0
fi

# --- a. the agent, as the DaemonSet's pod ------------------------------------------------------------
mkdir -p "$KS" /var/log/pods
# The stand-in serves until the scenario's own deadline (stage2's SCENARIO_TIMEOUT on the uptime
# clock), so a slow machine that needs all of it still has a kubelet for the last pods.
serve_secs=$((${SCENARIO_TIMEOUT:-900} - $(cut -d. -f1 /proc/uptime) - 10))
[ "$serve_secs" -lt 120 ] && serve_secs=120
timeout -s KILL $((serve_secs + 20)) "$PY" "$KUBELET" serve --root /var/lib/kubelet --state "$KS" --seconds "$serve_secs" \
  > "$W/kubelet-serve.log" 2>&1 &
serve_pid=$!
check "kubelet stand-in serves Registration and PodResources" wait_until 90 test -e "$KS/serve.ready"
t_agent=$(now)
if k agent 300 run-daemonset -f "$PODS/rendered.yaml" --name erdma-agent --namespace erdma-system \
     --pod-name "erdma-agent-node$ME" --config-file "config.yaml=$PODS/agent-config.yaml" --state "$KS"; then
  pass "the erdma-agent DaemonSet's pod runs from its image (mounts, capabilities, host network as rendered) ($(since "$t_agent") s)"
else
  fail "the erdma-agent DaemonSet's pod runs from its image"
fi
devices_listed() {
  $KJ get "$KS/plugins/aliyun_erdma.json" 'sum(1 for x in d["devices"] if x["ID"].startswith("rxe0") and x["health"] == "Healthy")' |
    grep -qE '^[1-9]'
}
if wait_until 120 devices_listed; then
  pass "the agent registered aliyun/erdma: the kubelet stand-in sees $($KJ get "$KS/plugins/aliyun_erdma.json" 'len(d["devices"])') healthy rxe0 slots ($(since "$t_agent") s after start)"
  result "agent registered: $(since "$t_agent") s after run-daemonset"
else
  fail "the agent registered aliyun/erdma devices with the kubelet stand-in"
  cat "$KS/plugins/aliyun_erdma.json" 2> /dev/null | head -c 600
fi
host_setup() { "$AGENT" pnet list | grep -cE '^ERDMA +(ib +rxe0 +1|eth +eth0 )' | grep -qx 2 && "$AGENT" ueid list | grep -qx ERDMA-CONTROLLER; }
check "the agent set the node up: pnet ERDMA on rxe0/1 and eth0, UEID ERDMA-CONTROLLER" wait_until 60 host_setup
check "the agent installed libsmc-preload.so into /var/lib/erdma-controller/lib" test -s /var/lib/erdma-controller/lib/libsmc-preload.so

# --- e. pod-netns layouts, fresh nodes -----------------------------------------------------------------------
# layout NAME CLIENT_REASON SERVER_REASON: node 2 serves from an SMC-R pod, node 1's SMC-R pod
# sends 4 MiB to the server pod's IP; both must fall back to TCP with the named reasons.
# The agent's own prediction for POD, from its PreStartContainer log line: VERDICT REASON. The agent
# logs that line once the prediction is made, after kubelet's answer: wait for it (up to 60 s).
setup_line() { agent_log | grep '"msg":"SMC-R pod setup"' | grep "\"pod\":\"[^\"]*/$1\"" | tail -1 | grep .; }
prediction_of() {
  wait_until 60 setup_line "$1" || log "    no SMC-R pod setup line for $1 after 60 s" >&2
  line=$(setup_line "$1")
  v=$(echo "$line" | sed -n 's/.*"smcr":"\([^"]*\)".*/\1/p')
  r=$(echo "$line" | sed -n 's/.*"smcr_reason":"\([^"]*\)".*/\1/p')
  echo "${v:-none} ${r:-none}"
}
layout() {
  ly=$1
  want_client=$2
  want_server=$3
  want_prediction=$4
  barrier "layout-$ly" 240 || { fail "$ly: node $PEER did not reach the layout"; return; }
  pod=smcr-$ly-$ME
  if [ "$ME" = 2 ]; then
    run_pod "$pod" smcr-pod.yaml --command 'bulk=["tcp-bulk","serve","--port","5201","--once","--hold","120","--timeout","150"]' ||
      { fail "$ly: server pod on node 2 started"; put "$ly.ip" none; return; }
    put "$ly.ip" "$(pod_ip "$pod")"
  else
    sip=$(get "$ly.ip" 240) || return
    run_pod "$pod" smcr-pod.yaml --command "bulk=[\"tcp-bulk\",\"send\",\"--to\",\"$sip:5201\",\"--bytes\",\"4M\",\"--hold\",\"90\",\"--timeout\",\"150\"]" ||
      { fail "$ly: client pod on node 1 started"; put "$ly.sent" 0; return; }
  fi
  myip=$(pod_ip "$pod")
  case "$ly:$myip" in
    bridge:10.244.$ME.* | ipvlan:10.77.0.$ME?) pass "$ly: the SMC-R pod on node $ME got its IP from the $ly conflist ($myip)" ;;
    *) fail "$ly: the SMC-R pod on node $ME got an IP of the $ly layout (got $myip)" ;;
  esac
  check "$ly: PreStartContainer configured the pod's netns (eth0 -> ERDMA, read back with erdma-agent pnet list --netns in the agent's container)" \
    pod_netns_configured "$pod"
  check "$ly: the pod's net.smc.wmem and net.smc.rmem are the configured 262144" pod_sysctls "$pod"
  # No silent fallback: the agent said at PreStartContainer what the kernel then does.
  pred=$(prediction_of "$pod")
  result "layout $ly, node $ME: agent's prediction $pred"
  if [ "$pred" = "$want_prediction" ]; then
    pass "$ly: the agent predicted it at PreStartContainer ($pred)"
  else
    fail "$ly: the agent predicted \"$want_prediction\" at PreStartContainer (got \"$pred\")"
    agent_log | grep '"msg":"SMC-R pod setup"' | tail -2 | cut -c1-600 | sed 's/^/    agent| /'
  fi
  ns=$(pod_ns "$pod")
  if [ "$ME" = 1 ]; then
    wait_bulk "$pod" 120
    check "$ly: 4 MiB from the client pod reached the server pod, checksum match" bulk_ok "$pod" 4194304
    in_agent "st-$pod" smc-status --netns "$ns" -a
    got=$($KJ conn "$W/st-$pod.out" "$myip" "$sip:5201")
    put "$ly.sent" 1
  else
    get "$ly.sent" 200 > /dev/null
    in_agent "st-$pod" smc-status --netns "$ns" -a
    got=$($KJ conn "$W/st-$pod.out" - "$myip:5201")
  fi
  sed "s/^/    st-$pod| /" "$W/st-$pod.out"
  want=$want_server
  [ "$ME" = 1 ] && want=$want_client
  log "$ly: node $ME's socket: ${got:-none}"
  result "layout $ly, node $ME (${myip}) socket: ${got:-none}"
  case "$got" in
    "TCP $want"*) pass "$ly: node $ME's socket is TCP with the predicted fallback reason $want" ;;
    *) fail "$ly: node $ME's socket is TCP with fallback reason $want (got ${got:-no socket})" ;;
  esac
  barrier "layout-$ly-done" 240
  delete_pod "$pod"  # before the CNI config changes: a sandbox is torn down with the config loaded then
}
layout bridge "NOSMCDEV(0x03030000)" "PEERDECL" "will-fall-back pod-subnet-outside-rdma-netdev"
"$PY" "$HERE/cni.py" --role "$ME" --layout ipvlan --out /run/cni/net.d/10-pods.conflist > /dev/null
sleep 2  # containerd reloads its CNI config on the directory's change event
layout ipvlan "PEERDECL" "TIMEOUT_CL(0x02010000)" "will-fall-back ipvlan-softroce-routing"
"$PY" "$HERE/cni.py" --role "$ME" --layout bridge --out /run/cni/net.d/10-pods.conflist > /dev/null

# --- c./d. node to node over hostNetwork pods ---------------------------------------------------------------
# hostpair PHASE SPEC...: SPEC is TAG:SERVER_FILE:CLIENT_FILE:PORT:BYTES. Node 2 starts each
# server pod, node 1 each client pod as soon as its server is up (so the pairs of a phase overlap);
# the clients hold their connections so each node's agent looks at all of them with one
# smc-status. Leaves $W/TAG.mode (the node's row for the connection, "MODE REASON"), $W/TAG.ok
# when the pair ran, and $W/PHASE.rxe (rxe0's packet counters over the phase).
field() { echo "$1" | cut -d: -f"$2"; }
hostpair() {
  hp=$1
  shift
  barrier "hp-$hp" 300 || { fail "$hp: node $PEER did not come"; return 1; }
  sent0=$(rxe_counter sent_pkts)
  rcvd0=$(rxe_counter rcvd_pkts)
  for spec; do rm -f "$W/$(field "$spec" 1).ok"; done
  if [ "$ME" = 2 ]; then
    for spec; do
      tag=$(field "$spec" 1)
      port=$(field "$spec" 4)
      if run_pod "$tag-srv" "$(field "$spec" 2)" --command "bulk=[\"tcp-bulk\",\"serve\",\"--port\",\"$port\",\"--once\",\"--hold\",\"270\",\"--timeout\",\"330\"]"; then
        put "$tag.up" 1
      else
        fail "$tag: server pod on node 2"
        put "$tag.up" 0
      fi
    done
    get "$hp.sent" 400 > /dev/null
    in_agent "st-$hp" smc-status -a
    for spec; do
      tag=$(field "$spec" 1)
      $KJ conn "$W/st-$hp.out" "$PEERIP:" "$MYIP:$(field "$spec" 4)" > "$W/$tag.mode"
      [ -s "$W/$tag-srv.fields" ] && touch "$W/$tag.ok"
    done
  else
    for spec; do
      tag=$(field "$spec" 1)
      port=$(field "$spec" 4)
      [ "$(get "$tag.up" 300)" = 1 ] || { fail "$tag: no server pod on node 2"; continue; }
      t_hp=$(now)
      run_pod "$tag-cli" "$(field "$spec" 3)" --command "bulk=[\"tcp-bulk\",\"send\",\"--to\",\"$PEERIP:$port\",\"--bytes\",\"$(field "$spec" 5)\",\"--hold\",\"240\",\"--timeout\",\"300\"]" ||
        { fail "$tag: client pod on node 1"; continue; }
      echo "$t_hp" > "$W/$tag.t0"
      if [ "$tag" = smcr ]; then
        # No hostPath in the pod spec: the library directory came in the agent's Allocate answer.
        k "$tag-lib" 60 exec --state "$KS" "team-a/$tag-cli" bulk -- ls /usr/lib/smc/
        check "$tag: the client container sees /usr/lib/smc/libsmc-preload.so through the Allocate mount (no hostPath volume)" \
          sh -c "$KJ stdout '$W/$tag-lib.json' | grep -qx libsmc-preload.so"
      fi
    done
    for spec; do
      tag=$(field "$spec" 1)
      [ -s "$W/$tag-cli.fields" ] || continue
      wait_bulk "$tag-cli" 180
      echo "$(since "$(cat "$W/$tag.t0")")" > "$W/$tag.secs"
    done
    in_agent "st-$hp" smc-status -a
    put "$hp.sent" 1
    for spec; do
      tag=$(field "$spec" 1)
      [ -s "$W/$tag-cli.fields" ] || continue
      $KJ conn "$W/st-$hp.out" "$MYIP:" "$PEERIP:$(field "$spec" 4)" > "$W/$tag.mode"
      sed "s/^/    $tag-cli| /" "$W/$tag-cli.bulk"
      check "$tag: $(field "$spec" 5) bytes from node 1's pod reached node 2's pod, checksum match ($(cat "$W/$tag.secs") s incl. pod start)" \
        bulk_ok "$tag-cli" "$(field "$spec" 5)" && touch "$W/$tag.ok"
    done
  fi
  for spec; do
    tag=$(field "$spec" 1)
    grep -E ":$(field "$spec" 4) " "$W/st-$hp.out" | sed "s/^/    st-$tag| /"
    log "$tag: node $ME's socket: $(cat "$W/$tag.mode" 2> /dev/null)"
  done
  sent=$(( $(rxe_counter sent_pkts) - sent0 ))
  rcvd=$(( $(rxe_counter rcvd_pkts) - rcvd0 ))
  log "$hp: rxe0 sent_pkts +$sent, rcvd_pkts +$rcvd"
  echo "$sent $rcvd" > "$W/$hp.rxe"
  barrier "hp-$hp-done" 400
  return 0
}
hostpair smcr smcr:smcr-host.yaml:smcr-host.yaml:5301:67108864
if [ -e "$W/smcr.ok" ]; then
  check "SMC-R journey: erdma-agent smc-status in node $ME's agent container shows the connection as SMCR" grep -q '^SMCR' "$W/smcr.mode"
  read -r sent rcvd < "$W/smcr.rxe"
  # 64 MiB at rxe's 1024-byte MTU: at least 65536 data packets one way
  if [ "$ME" = 1 ]; then
    check "SMC-R journey: rxe0 on node 1 sent >= 64 MiB / 1 KiB packets (+$sent)" [ "$sent" -ge 65536 ]
    result "SMC-R 64 MiB hostNetwork pods: $($KJ get "$W/smcr-cli.bulk" 'd["mib_per_s"]') MiB/s, rxe0 sent +$sent"
  else
    check "SMC-R journey: rxe0 on node 2 received >= 64 MiB / 1 KiB packets (+$rcvd)" [ "$rcvd" -ge 65536 ]
  fi
fi
# The plain TCP reference and the negative control at the same time: neither touches rxe0.
hostpair plain tcp:tcp-host.yaml:tcp-host.yaml:5302:16777216 neg:tcp-host.yaml:smcr-host.yaml:5303:1048576
if [ -e "$W/tcp.ok" ]; then
  # a plain TCP socket is no SMC socket, so smc-status must not list the connection at all
  check "plain TCP reference (no annotation, no preload): smc-status in node $ME's agent lists no SMC socket for it" [ ! -s "$W/tcp.mode" ]
  [ "$ME" = 1 ] && result "plain TCP 16 MiB hostNetwork pods: $($KJ get "$W/tcp-cli.bulk" 'd["mib_per_s"]') MiB/s"
fi
if [ -e "$W/neg.ok" ] && [ "$ME" = 1 ]; then
  r=$(cut -d' ' -f2 "$W/neg.mode")
  result "negative control client socket: $(cat "$W/neg.mode")"
  case "$(cat "$W/neg.mode")" in
    "TCP "[A-Z]*"(0x"*) pass "negative control: server pod without the annotation -> the SMC-R client's socket is TCP, fallback reason by name: $r" ;;
    *) fail "negative control: the client's socket is TCP with a named fallback reason (got $(cat "$W/neg.mode"))" ;;
  esac
fi

# removed_during_start: a pod removed while its PreStartContainer runs (deleted as soon as its
# sandbox exists), then the next SMC-R pod must still be configured. Node 1 does it after its
# NCCL pod, while node 2 runs the containerd and agent restarts.
removed_during_start() {
  sed "s/^  name: .*/  name: gone/" "$PODS/smcr-pod.yaml" > "$W/gone.yaml"
  timeout -s KILL 200 "$PY" "$KUBELET" run-pod -f "$W/gone.yaml" --state "$KS" \
    > "$W/pod-gone.json" 2> "$W/pod-gone.err" &
  gpid=$!
  has_sandbox() { $KJ get "$KS/pods.json" 'any("gone" in k and v.get("sandbox_id") for k, v in (d.get("pods") or d).items())' | grep -qx True; }
  wait_until 120 has_sandbox || log "    the pod 'gone' never got a sandbox"
  k del-gone 120 delete-pod team-a/gone --grace 2 --state "$KS"
  wait "$gpid"
  grc=$?
  log "    run-pod of the removed pod exited $grc ($(tail -1 "$W/pod-gone.err"))"
  # run-pod succeeding means the removal came only after the start: the race was not hit
  raced="removed during its start"
  [ "$grc" = 0 ] && raced="removed right after its start (the removal came too late to race PreStartContainer)"
  if run_pod next smcr-pod.yaml; then
    check "after a pod was $raced, the next SMC-R pod is configured" pod_configured_host next
  else
    fail "after a pod was $raced, the next SMC-R pod starts"
  fi
}

# --- b. the NCCL pod (node 1) --------------------------------------------------------------------------------
if [ "$ME" = 1 ]; then
  if run_pod nccl-allreduce-0 nccl.yaml; then
    pass "the NCCL pod (examples/nccl-statefulset.yaml after mutate) started with an aliyun/erdma device"
    k nccl-ls 60 exec --state "$KS" ml-training/nccl-allreduce-0 trainer -- ls /dev/infiniband/
    $KJ stdout "$W/nccl-ls.json" | tr '\n' ' ' | sed 's/^/    ls \/dev\/infiniband: /'
    echo
    check "ls /dev/infiniband/ in the NCCL pod's runc container shows rdma_cm and uverbs0" \
      sh -c "$KJ stdout '$W/nccl-ls.json' | grep -qx rdma_cm && $KJ stdout '$W/nccl-ls.json' | grep -qx uverbs0"
    k nccl-exec-env 60 exec --state "$KS" ml-training/nccl-allreduce-0 trainer -- env
    RUN_LINES=5 run nccl-env 20 $KJ env "$W/pod-nccl-allreduce-0.json" "$W/nccl-exec-env.json" trainer NCCL_ "$(cat "$PODS/nccl.expected.json")"
    check "the NCCL pod's environment (exec env) holds the NCCL settings exactly as the merged spec and run-pod's request, and the Allocate answer's envs" [ "$rc" = 0 ]
    log "    Allocate answer: $($KJ get "$W/pod-nccl-allreduce-0.json" 'd["containers"]["trainer"].get("allocate")')"
  else
    fail "the NCCL pod (examples/nccl-statefulset.yaml after mutate) started"
  fi
fi

[ "$ME" = 1 ] && removed_during_start

# --- f. faults (node 2 while node 1 runs the NCCL pod and the removed-pod race; then node 1 too) --------------------------------------------------------------------------------------
restart_containerd() {  # SIGNAL
  kill "-$1" "$(cat "$T/containerd.pid")"
  i=0
  while kill -0 "$(cat "$T/containerd.pid")" 2> /dev/null && [ "$i" -lt 100 ]; do sleep 0.2; i=$((i + 1)); done
  /usr/bin/containerd --config "$T/containerd.toml" >> "$W/containerd.log" 2>&1 &
  echo $! > "$T/containerd.pid"
  ctr_wait 90
}
# containerd_round SIGNAL: containerd stopped with SIGNAL and started again while the agent's
# container keeps running; a new SMC-R pod must still be configured by PreStartContainer.
containerd_round() {
  sig=$1
  if restart_containerd "$sig"; then
    pass "containerd restarted after SIG$sig"
  else
    fail "containerd restarted after SIG$sig"
    return
  fi
  p=after-$(echo "$sig" | tr 'A-Z' 'a-z')
  if run_pod "$p" smcr-pod.yaml; then
    if ! check "after containerd's SIG$sig restart, a new SMC-R pod is still configured by PreStartContainer (agent not restarted)" pod_configured_host "$p"; then
      log "    the agent about pod $p:"
      agent_log | grep -E "$p|CRI|cri|containerd|UNAVAILABLE|unavailable" | tail -6 | cut -c1-400 | sed 's/^/    agent| /'
    fi
  else
    fail "after containerd's SIG$sig restart, a new SMC-R pod starts (PreStartContainer answered): $(grep -i error "$W/pod-$p.err" | tail -1)"
  fi
}
# Node 1 (after its NCCL pod and the removed-pod race): containerd killed outright.
[ "$ME" = 1 ] && containerd_round KILL
if [ "$ME" = 2 ]; then
  # An SMC-R pod that runs through the faults: the agent's resync must find it afterwards.
  run_pod resync smcr-pod.yaml || fail "an SMC-R pod started for the resync check"
  containerd_round TERM
  # The agent's container is restarted (as kubelet restarts a crashed one): its resync must put the
  # running SMC-R pod's entry back, once.
  if [ -s "$W/pod-resync.json" ]; then
    ns=$(pod_ns resync)
    "$AGENT" pnet flush --netns "$ns" > /dev/null
    if k agent-restart 180 restart-container "$AGENT_POD" agent --state "$KS"; then
      pass "the agent's container restarted (restart-container)"
    else
      fail "the agent's container restarted (restart-container)"
    fi
    count_entries() { "$AGENT" pnet list --netns "$ns" | grep -cE '^ERDMA +eth +eth0 '; }
    check "the restarted agent's resync configured the running SMC-R pod again" wait_until 90 sh -c "[ \$($AGENT pnet list --netns $ns | grep -cE '^ERDMA +eth +eth0 ') -ge 1 ]"
    sleep 6  # one more rescan period: a second pass must not add the entry twice
    check "no duplicate pnet entries after the resync ($(count_entries) x eth0 -> ERDMA in the pod)" [ "$(count_entries)" = 1 ]
    check "no duplicate pnet entries on the node after the agent restart" \
      [ "$("$AGENT" pnet list | grep -cE '^ERDMA +eth +eth0 ')" = 1 -a "$("$AGENT" pnet list | grep -cE '^ERDMA +ib +rxe0 +1')" = 1 ]
    # with a fresh agent container (fresh mounts), a new pod after the containerd restarts
    if run_pod after-agent-restart smcr-pod.yaml; then
      check "after the agent's restart, a new SMC-R pod is configured by PreStartContainer" pod_configured_host after-agent-restart
    else
      fail "after the agent's restart, a new SMC-R pod starts"
    fi
  fi
  check "the agent's container is still running after the faults" in_agent alive version
fi

# --- h. (on request) PreStartContainer latency over many pods ------------------------------------------------
# TWO_NODES_LATENCY_PODS=N (two-nodes.sh): N more SMC-R pods in the pod subnet, one after another,
# split between the nodes (node 1 takes the odd ones), each configured by the agent on a real
# containerd. Off in the test suite: under TCG each pod costs seconds of emulated CPU.
# hook_steps PREFIX [SKIP_PREFIX]: p50 and p99 of the hook's total and per-step times (its log
# line's fields) over the configured PreStartContainer setups of pods team-a/PREFIX*, leaving out
# team-a/SKIP_PREFIX*
hook_steps() {
  # the lines of setups whose prediction is still being made are not there yet
  wait_until 60 predictions_logged || log "    SMC-R predictions still pending after 60 s" >&2
  agent_log | grep '"msg":"SMC-R pod setup"' | grep '"trigger":"PreStartContainer"' | grep '"result":"configured"' |
    grep "\"pod\":\"team-a/$1" | grep -v "\"pod\":\"team-a/${2:-//}" > "$W/setups.log"
  hs="over $(wc -l < "$W/setups.log") configured setups:"
  for st in us podresources_us runtime_us netns_us predict_us; do
    sed -n "s/.*\"$st\":\([0-9]*\).*/\1/p" "$W/setups.log" > "$W/step.txt"
    [ -s "$W/step.txt" ] && hs="$hs $st p50 $(pctl 50 "$W/step.txt") p99 $(pctl 99 "$W/step.txt")"
  done
  echo "$hs"
}
if [ "${LATENCY_PODS:-0}" -gt 0 ]; then
  t_lat=$(now)
  lat_ok=0
  all_ms=$PRESTART
  PRESTART=$W/latency-ms.txt  # run_pod records these pods' latencies here, apart from the phases'
  : > "$PRESTART"
  i=$ME
  while [ "$i" -le "$LATENCY_PODS" ]; do
    run_pod "lat-$i" smcr-pod.yaml && pod_configured_host "lat-$i" && lat_ok=$((lat_ok + 1))
    i=$((i + 2))
  done
  lat_n=$(( (LATENCY_PODS - ME) / 2 + 1 ))
  check "latency run: all $lat_n of this node's pods started and configured ($lat_ok; $(since "$t_lat") s)" [ "$lat_ok" = "$lat_n" ]
  result "latency run: PreStartContainer at the kubelet stand-in over $(wc -l < "$PRESTART") pods: p50 $(pctl 50 "$PRESTART") ms, p99 $(pctl 99 "$PRESTART") ms (all: $(tr '\n' ' ' < "$PRESTART"))"
  result "latency run: the agent's hook $(hook_steps lat-)"
  PRESTART=$all_ms
fi

# --- g. numbers ------------------------------------------------------------------------------------------------
if [ -s "$PRESTART" ]; then
  result "PreStartContainer latency on containerd: p50 $($KJ p50 "$PRESTART") ms over $(wc -l < "$PRESTART") pods (all: $(tr '\n' ' ' < "$PRESTART"))"
  # where the agent's hook spent it (the latency run's pods, if any, are reported apart above)
  result "the agent's hook $(hook_steps '' lat-)"
fi
barrier end 600
agent_log > "$VMOUT/agent.log"
cp "$W/containerd.log" "$W/kubelet-serve.log" "$VMOUT/" 2> /dev/null
kill "$serve_pid" 2> /dev/null
