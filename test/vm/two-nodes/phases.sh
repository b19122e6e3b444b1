# The scenario phases of node.sh (sourced; POSIX sh). Runs in step on both nodes.

# --- node to node SMC-R with host processes: the link itself ------------------------------------------
# A python client and server with no AF_SMC in their code under LD_PRELOAD of libsmc-preload.so,
# node 1 -> node 2, both in init_net, the UEID and pnet entries set with the erdma-agent CLI.
rxe_counter() { cat "/sys/class/infiniband/rxe0/ports/1/hw_counters/$1" 2> /dev/null || echo 0; }
host_smcr() {
  "$AGENT" ueid list 2> /dev/null | grep -qx ERDMA-CONTROLLER || "$AGENT" ueid add ERDMA-CONTROLLER > /dev/null
  "$AGENT" pnet list 2> /dev/null | grep -qE '^ERDMA +ib +rxe0 +1' || "$AGENT" pnet add ERDMA --ib rxe0 --port 1 > /dev/null
  "$AGENT" pnet list 2> /dev/null | grep -qE '^ERDMA +eth +eth0 ' || "$AGENT" pnet add ERDMA --eth eth0 > /dev/null
  cp "$BUILD/agent/preload/libsmc-preload.so" "$T/libsmc-preload.so"
  sent0=$(rxe_counter sent_pkts)
  rcvd0=$(rxe_counter rcvd_pkts)
  if [ "$ME" = 2 ]; then
    rm -f "$W/hsmc.port"
    timeout -s KILL 150 env LD_PRELOAD="$T/libsmc-preload.so" SMC_PRELOAD_MODE=auto "$PY" "$ECHO" serve --bind "$MYIP" \
      --port-file "$W/hsmc.port" --timeout 120 > "$W/hsmc.server" 2>&1 &
    spid=$!
    wait_until 30 test -s "$W/hsmc.port" && put hsmc.port "$(cat "$W/hsmc.port")"
    get hsmc.ready 150 > /dev/null
    run hsmc-status 30 "$AGENT" smc-status -a
    wait "$spid"
    sed 's/^/    hsmc.server| /' "$W/hsmc.server" | grep -v DEBUG | head -5
    check "host processes: smc-status on node 2 shows node 1's connection as SMCR" \
      grep -qE "^[A-Z0-9]+ +SMCR .*$MYIP:$(cat "$W/hsmc.port") +$PEERIP:" "$W/hsmc-status.out"
  else
    hport=$(get hsmc.port 120) || { fail "host processes: no server port from node 2"; return; }
    timeout -s KILL 150 env LD_PRELOAD="$T/libsmc-preload.so" SMC_PRELOAD_MODE=auto "$PY" "$ECHO" connect --to "$PEERIP:$hport" \
      --bytes 16777216 --hold 8 --ready-file "$W/hsmc.ready" --timeout 120 > "$W/hsmc.client" 2>&1 &
    cpid=$!
    wait_until 140 test -e "$W/hsmc.ready"
    put hsmc.ready 1
    run hsmc-status 30 "$AGENT" smc-status
    wait "$cpid"
    sed 's/^/    hsmc.client| /' "$W/hsmc.client" | grep -v DEBUG | head -5
    check "host processes: 16 MiB node 1 -> node 2 under LD_PRELOAD, checksum ok" grep -q '^OK bytes=16777216' "$W/hsmc.client"
    check "host processes: smc-status on node 1 shows the connection to node 2 as SMCR" \
      grep -qE "^[A-Z0-9]+ +SMCR .*$PEERIP:$hport" "$W/hsmc-status.out"
    result "host-process SMC-R 16 MiB: $(grep -oE 'MiB/s=[0-9.]+' "$W/hsmc.client" | head -1)"
  fi
  sent=$(( $(rxe_counter sent_pkts) - sent0 ))
  rcvd=$(( $(rxe_counter rcvd_pkts) - rcvd0 ))
  log "rxe0 during the exchange: sent_pkts +$sent, rcvd_pkts +$rcvd"
  # 16 MiB at rxe's 1024-byte MTU is 16384 packets one way; the sender sends, the receiver acks.
  if [ "$ME" = 1 ]; then
    check "host processes: rxe0 sent at least 16 MiB / 1 KiB packets (+$sent)" [ "$sent" -ge 16384 ]
  else
    check "host processes: rxe0 received at least 16 MiB / 1 KiB packets (+$rcvd)" [ "$rcvd" -ge 16384 ]
  fi
}
host_smcr
