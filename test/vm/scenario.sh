#!/bin/sh
# The real-kernel scenario, run as root inside the VM (see run.sh). Soft-RoCE (rxe) on a veth pair
# in init_net stands in for eRDMA; the project's own code does the work:
#   - the SMC clients report "no SMC" before the module is there;
#   - agent_smc_kernel_test runs the PnetTable contract and every decoder against this kernel;
#   - pnet entries and the UEID are set and read back through the CLI;
#   - a python3 client and server with no AF_SMC in their code, under LD_PRELOAD, form SMC-R
#     (smc-status: SMCR on the client socket; smc-stats: a v2 success);
#   - negative control: mismatched PNETIDs, the same programs still work and smc-status names the
#     fallback reason.
# Every wait is bounded; output goes to files. The last line is "N passed, M failed".
# Environment from stage2.sh: VMOUT, KDIR, KVER; from the kernel command line: build dir, source dir.
set -u
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    build=*) BUILD=${arg#build=} ;;
    src=*) SRC=${arg#src=} ;;
  esac
done
PY=/usr/bin/python3              # Debian's python, never another one first on PATH
TOOL=$BUILD/test/vm/smc-vm-tool  # TEMPORARY stand-in for the erdma-agent subcommands
PRELOAD=$BUILD/agent/preload/libsmc-preload.so
KTEST=$BUILD/test/agent/agent_smc_kernel_test
ECHO=$SRC/test/vm/smc_echo.py
W=/tmp/work
mkdir -p "$W"
passed=0
failed=0

log() { echo "[$(cut -d' ' -f1 /proc/uptime)] $*"; }
pass() { passed=$((passed + 1)); log "PASS: $*"; }
fail() { failed=$((failed + 1)); log "FAIL: $*"; }
# run NAME SECONDS CMD...: runs CMD bounded, output to $W/NAME.out, shown in the log.
run() {
  name=$1
  secs=$2
  shift 2
  timeout -s KILL "$secs" "$@" > "$W/$name.out" 2>&1
  rc=$?
  sed "s/^/    $name| /" "$W/$name.out"
  return $rc
}
wait_for_file() {  # FILE SECONDS
  i=0
  while [ ! -s "$1" ] && [ "$i" -lt "$(($2 * 10))" ]; do sleep 0.1; i=$((i + 1)); done
  [ -s "$1" ]
}

log "kernel $(uname -r); build $BUILD"

# --- before SMC exists ---------------------------------------------------------------------------
if run nosmc 20 "$TOOL" pnet list; then
  fail "pnet list before the smc module is loaded should fail"
elif grep -q "the kernel has no SMC (module smc not loaded)" "$W/nosmc.out"; then
  pass "pnet list says the kernel has no SMC before the module is loaded"
else
  fail "pnet list failed without the no-SMC message"
fi

# --- modules --------------------------------------------------------------------------------------
cat > /tmp/modprobe <<EOS
#!/bin/sh
exec /sbin/modprobe -d "$KDIR" -S "$KVER" "\$@"
EOS
chmod +x /tmp/modprobe
echo /tmp/modprobe > /proc/sys/kernel/modprobe
mods_ok=1
# crc32_generic first: rdma_rxe asks the crypto API for crc32 by name (see kernel-vm-findings).
for m in crc32_generic smc smc_diag rdma_rxe ib_uverbs rdma_ucm veth; do
  /tmp/modprobe "$m" || { mods_ok=0; log "modprobe $m failed"; }
done
[ "$mods_ok" = 1 ] && pass "kernel modules loaded" || fail "kernel modules loaded"

# --- network: a veth pair in init_net, traffic forced across it (rxe only works in init_net) ----
ip link set lo up
ip link add veth0 type veth peer name veth1
ip addr add 10.99.0.1/24 dev veth0
ip addr add 10.99.0.2/24 dev veth1
ip link set veth0 up
ip link set veth1 up
for d in all default veth0 veth1; do echo 0 > "/proc/sys/net/ipv4/conf/$d/rp_filter"; done
for d in veth0 veth1; do echo 1 > "/proc/sys/net/ipv4/conf/$d/accept_local"; done
ip rule add pref 10 iif veth0 lookup local
ip rule add pref 11 iif veth1 lookup local
ip rule add pref 20 to 10.99.0.2 lookup 100
ip route add 10.99.0.2 dev veth0 src 10.99.0.1 table 100
ip rule add pref 21 to 10.99.0.1 lookup 101
ip route add 10.99.0.1 dev veth1 src 10.99.0.2 table 101
ip rule del pref 0 lookup local
ip rule add pref 1000 lookup local
if run rxe 30 sh -c 'rdma link add rxe0 type rxe netdev veth0 && rdma link add rxe1 type rxe netdev veth1 && rdma link show'; then
  pass "Soft-RoCE devices rxe0 and rxe1 created"
else
  fail "Soft-RoCE devices rxe0 and rxe1 created"
fi
run ibv 20 ibv_devices || true

# --- the kernel clients against this kernel ------------------------------------------------------
if ERDMA_KERNEL_TESTS=1 run ktest 120 "$KTEST" && grep -qE "test cases: +4 \| +4 passed \| +0 failed \| +0 skipped" "$W/ktest.out"; then
  pass "agent_smc_kernel_test: pnet contract (init_net and a fresh netns), UEIDs, every SMC_GEN_NETLINK and sock_diag decoder"
else
  fail "agent_smc_kernel_test"
fi

# --- pnet table and UEID through the CLI -----------------------------------------------------------
setup_pnet() {  # ETH0_ID IB0_ID ETH1_ID IB1_ID
  "$TOOL" pnet flush > /dev/null &&
    "$TOOL" pnet add "$1" --eth veth0 && "$TOOL" pnet add "$2" --ib rxe0 --port 1 &&
    "$TOOL" pnet add "$3" --eth veth1 && "$TOOL" pnet add "$4" --ib rxe1 --port 1
}
# (each CLI call bounds its own netlink waits)
if setup_pnet PNETA PNETA PNETB PNETB > "$W/pnetset.out" 2>&1 && run pnetlist 20 "$TOOL" pnet list &&
   [ "$(grep -cE '^PNET[AB] +(eth|ib) +(veth[01]|rxe[01]) ' "$W/pnetlist.out")" = 4 ] &&
   grep -qE '^PNETA +ib +rxe0 +1$' "$W/pnetlist.out" && grep -qE '^PNETB +eth +veth1 +-$' "$W/pnetlist.out"; then
  pass "pnet entries added and listed (IB and ETH)"
else
  fail "pnet entries added and listed"
fi
if run pnetdup 20 "$TOOL" pnet add PNETA --eth veth0 && grep -q "already present" "$W/pnetdup.out"; then
  pass "adding an existing pnet entry is success (already present)"
else
  fail "adding an existing pnet entry"
fi
if run ueidadd 20 "$TOOL" ueid add E2E-TEST-UEID && run ueidlist 20 "$TOOL" ueid list && grep -qx "E2E-TEST-UEID" "$W/ueidlist.out"; then
  pass "UEID added and listed"
else
  fail "UEID added and listed"
fi

# --- a preloaded client and server ---------------------------------------------------------------
# exchange TAG BYTES [MODE]: MODE is the SMC_PRELOAD_MODE under LD_PRELOAD, none for plain TCP; server on 10.99.0.2, client from 10.99.0.1; the client holds its
# connection open while smc-status looks at it. Leaves $W/TAG.status and $W/TAG.client.
exchange() {
  tag=$1
  bytes=$2
  mode=${3:-}  # "" = no preload, else SMC_PRELOAD_MODE
  rm -f "$W/$tag.port" "$W/$tag.ready"
  if [ -n "$mode" ]; then
    env LD_PRELOAD="$PRELOAD" SMC_DEBUG=1 SMC_PRELOAD_MODE="$mode" timeout -s KILL 120 "$PY" "$ECHO" serve --bind 10.99.0.2 --port-file "$W/$tag.port" --timeout 90 > "$W/$tag.server" 2>&1 &
  else
    timeout -s KILL 120 "$PY" "$ECHO" serve --bind 10.99.0.2 --port-file "$W/$tag.port" --timeout 90 > "$W/$tag.server" 2>&1 &
  fi
  spid=$!
  if ! wait_for_file "$W/$tag.port" 30; then
    log "$tag: server did not start"; cat "$W/$tag.server"; kill -9 $spid 2>/dev/null; return 1
  fi
  port=$(cat "$W/$tag.port")
  if [ -n "$mode" ]; then
    env LD_PRELOAD="$PRELOAD" SMC_DEBUG=1 SMC_PRELOAD_MODE="$mode" timeout -s KILL 150 "$PY" "$ECHO" connect --to "10.99.0.2:$port" --bytes "$bytes" --hold 8 --ready-file "$W/$tag.ready" --timeout 120 > "$W/$tag.client" 2>&1 &
  else
    timeout -s KILL 150 "$PY" "$ECHO" connect --to "10.99.0.2:$port" --bytes "$bytes" --hold 8 --ready-file "$W/$tag.ready" --timeout 120 > "$W/$tag.client" 2>&1 &
  fi
  cpid=$!
  wait_for_file "$W/$tag.ready" 140 || log "$tag: client did not finish its transfer"
  timeout -s KILL 20 "$TOOL" smc-status > "$W/$tag.status" 2>&1
  timeout -s KILL 20 "$TOOL" smc-status -o json > "$W/$tag.status.json" 2>&1
  if [ "$tag" = smcr ]; then  # raw kernel replies for the codec tests, while the connection is up
    mkdir -p "$VMOUT/recorded"
    timeout -s KILL 30 "$TOOL" record "$VMOUT/recorded" > "$W/record.out" 2>&1 || log "recording replies failed"
  fi
  wait $cpid
  crc=$?
  wait $spid
  sed "s/^/    $tag.client| /" "$W/$tag.client"
  sed "s/^/    $tag.server| /" "$W/$tag.server" | head -20
  sed "s/^/    $tag.status| /" "$W/$tag.status"
  echo "$port" > "$W/$tag.peerport"
  return $crc
}
client_row() {  # TAG: the smc-status line of the client's socket
  grep -E " 10\.99\.0\.1:[0-9]+ +10\.99\.0\.2:$(cat "$W/$1.peerport") " "$W/$1.status"
}

rxe_sent() { rdma statistic show link rxe0/1 2>/dev/null | grep -oE 'sent_pkts [0-9]+' | cut -d' ' -f2; }
sent_before=$(rxe_sent)
if exchange smcr 16777216 auto && grep -q "^OK bytes=16777216" "$W/smcr.client"; then
  pass "preloaded python client and server exchanged 16 MiB, checksum ok"
else
  fail "preloaded python exchange (16 MiB)"
fi
if grep -q -- "-> IPPROTO_SMC fd\|-> AF_SMC fd" "$W/smcr.client"; then
  pass "the preload library turned the client's TCP socket into an SMC socket"
else
  fail "the preload library did not convert the client's socket"
fi
sent_after=$(rxe_sent)
if [ "${sent_after:-0}" -gt $((${sent_before:-0} + 10000)) ]; then
  pass "the 16 MiB went through Soft-RoCE: rxe0 sent $((sent_after - ${sent_before:-0})) RoCE packets"
else
  fail "rxe0 sent no RoCE traffic for the SMC-R exchange (${sent_before:-?} -> ${sent_after:-?})"
fi
row=$(client_row smcr)
log "client socket: $row"
if echo "$row" | grep -qE "^[A-Z0-9]+ +SMCR "; then
  pass "smc-status reports the client connection as SMCR"
else
  fail "smc-status reports the client connection as SMCR"
fi
run stats1 20 "$TOOL" smc-stats -o json
if "$PY" -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if s["smcr"]["clientV2Success"] >= 1 and s["smcr"]["serverV2Success"] >= 1 else 1)' "$W/stats1.out"; then
  pass "smc-stats counts the SMC-R v2 success (client and server)"
else
  fail "smc-stats counts the SMC-R v2 success"
fi
run stats1t 20 "$TOOL" smc-stats || true

# The same with SMC_PRELOAD_MODE=ipproto_smc (socket(AF_INET, SOCK_STREAM, IPPROTO_SMC), 6.11+).
v2_before=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["smcr"]["clientV2Success"])' "$W/stats1.out" 2>/dev/null || echo 0)
if exchange ipproto 4194304 ipproto_smc && grep -q "^OK bytes=4194304" "$W/ipproto.client" &&
   grep -q -- "-> IPPROTO_SMC fd" "$W/ipproto.client" && run stats3 20 "$TOOL" smc-stats -o json &&
   "$PY" -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["smcr"]["clientV2Success"] > int(sys.argv[2]) else 1)' "$W/stats3.out" "$v2_before"; then
  pass "SMC_PRELOAD_MODE=ipproto_smc: IPPROTO_SMC sockets form SMC-R v2 too (4 MiB, checksum ok)"
else
  fail "SMC_PRELOAD_MODE=ipproto_smc exchange"
fi

# Plain TCP over the same veth, for the throughput comparison.
if exchange tcp 16777216 && grep -q "^OK bytes=16777216" "$W/tcp.client"; then
  pass "plain TCP reference exchange (16 MiB)"
else
  fail "plain TCP reference exchange"
fi

# --- negative control: PNETIDs that do not match --------------------------------------------------
if setup_pnet PNETA PNETC PNETB PNETD > "$W/pnetbad.out" 2>&1; then
  pass "mismatched pnet entries set"
else
  fail "mismatched pnet entries set"
fi
if exchange neg 1048576 auto && grep -q "^OK bytes=1048576" "$W/neg.client"; then
  pass "negative control: the same preloaded programs still work (1 MiB, checksum ok)"
else
  fail "negative control: the same preloaded programs still work"
fi
row=$(client_row neg)
log "client socket: $row"
if echo "$row" | grep -qE "^[A-Z0-9]+ +TCP .* [A-Z_0-9]+ \(0x[0-9a-f]{8}\): " && ! echo "$row" | grep -q UNKNOWN; then
  pass "negative control: smc-status reports TCP with the fallback reason by name: $(echo "$row" | grep -oE '[A-Z_0-9]+ \(0x[0-9a-f]{8}\)')"
else
  fail "negative control: smc-status reports TCP with a named fallback reason"
fi
run stats2 20 "$TOOL" smc-stats || true

# --- throughput (TCG numbers are only relative) -----------------------------------------------------
for t in smcr tcp; do
  log "throughput $t: $(grep -oE 'MiB/s=[0-9.]+' "$W/$t.client" | head -1)"
done
grep -oE 'MiB/s=[0-9.]+' "$W/smcr.client" | head -1 | sed 's/^/RESULT smcr_/' > "$VMOUT/results.txt"
grep -oE 'MiB/s=[0-9.]+' "$W/tcp.client" | head -1 | sed 's/^/RESULT tcp_/' >> "$VMOUT/results.txt"

log "rdma statistics:"
rdma statistic show 2>/dev/null | head -4 | sed 's/^/    /'
echo "$passed passed, $failed failed"
