#!/bin/bash
# Runs inside the systemd-nspawn container of nspawn_e2e.sh as spite-check.service, after
# spited.service has started (or failed). Writes "STEP <name>: ok|FAIL" lines and what they saw to
# /result.txt, ending with "CHECK DONE"; the unit then powers the container off.
exec >/result.txt 2>&1
sock=/run/spite/spited.sock

step() {  # step NAME COMMAND...: runs the command, records ok or FAIL
  local name=$1
  shift
  if "$@"; then echo "STEP $name: ok"; else echo "STEP $name: FAIL"; fi
}
# A client of a socket whose service keeps failing waits in the listen backlog: bound every call.
ctl() { timeout 10 spitectl "$@"; }
prop() { systemctl show -p "$2" --value "$1"; }
wait_active() {  # after a reload the unit passes through "reloading"
  for _ in $(seq 50); do
    [[ $(prop spited.service ActiveState) == active ]] && return 0
    sleep 0.1
  done
  return 1
}

echo "== spited.service after boot"
systemctl show spited.service -p ActiveState,SubState,Result,StatusText,MainPID,NRestarts,WatchdogUSec
pid=$(prop spited.service MainPID)
# READY=1 arrived (Type=notify leaves "activating" only then) and STATUS= says it serves.
step ready test "$(prop spited.service ActiveState)" = active -a "$(prop spited.service StatusText)" = serving

echo "== identity of pid $pid"
grep -E '^(Uid|Gid|Groups|NoNewPrivs|Seccomp|CapBnd|CapEff):' "/proc/$pid/status"
getent passwd spite
getent group spite render video
identity() {
  local st=/proc/$pid/status uid gid
  uid=$(id -u spite) && gid=$(id -g spite) || return 1
  grep -qE "^Uid:\s+$uid\s+$uid\s+$uid\s+$uid$" "$st" &&
    grep -qE "^Gid:\s+$gid\s" "$st" &&
    grep -qE "^Groups:.*\b$(getent group render | cut -d: -f3)\b" "$st" &&
    grep -qE "^Groups:.*\b$(getent group video | cut -d: -f3)\b" "$st" &&
    grep -qE '^NoNewPrivs:\s+1$' "$st" &&
    grep -qE '^Seccomp:\s+2$' "$st" &&
    grep -qE '^CapBnd:\s+0+$' "$st"
}
step identity identity

echo "== sockets"
systemctl show spited.socket spited-http.socket -p Id,ActiveState,Listen
journalctl -b -u spited.service --no-pager -o cat | grep -E 'ready|kernel library' || true
activated() { journalctl -b -u spited.service --no-pager -o cat | grep -q 'control socket (socket activation)'; }
step activated activated
ls -ld /run/spite "$sock"
step socket-file test "$(stat -c '%U:%G %a' "$sock")" = "spite:spite 660"

echo "== D-Bus"
# spited owns org.spite.Daemon1 on the system bus: the shipped policy lets user spite own it.
owner=$(busctl --system call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus \
  GetConnectionUnixProcessID s org.spite.Daemon1 2>&1)
echo "owner of org.spite.Daemon1: $owner"
step dbus-name test "$owner" = "u $pid"

echo "== spitectl status"
status=$(ctl status --socket "$sock" 2>&1)
rc=$?
echo "$status"
step status test $rc -eq 0 -a -n "$(grep stories260K <<<"$status")"
# The plug-in was dlopen'ed from its sealed memfd under MemoryDenyWriteExecute=yes and passed its
# self-test.
step plugin grep -q 'generic/generic/x86_64' <<<"$status"

echo "== spitectl run"
run=$(ctl run --socket "$sock" --model stories260K --prompt "Once upon a time" -n 16 --temperature 0 2>&1)
rc=$?
echo "$run"
step run test $rc -eq 0 -a -n "$(grep -F "spited $sock:" <<<"$run" | grep 'generated 16 tokens')"

echo "== group access"
timeout 10 runuser -u spitetester -- spitectl status --socket "$sock" >/dev/null 2>&1
step group-member test $? -eq 0
timeout 10 runuser -u spiteoutsider -- spitectl status --socket "$sock"
rc=$?
echo "outsider: exit status $rc"
step outsider-refused test $rc -ne 0

echo "== watchdog (WatchdogSec=1s drop-in)"
sleep 3
systemctl show spited.service -p ActiveState,MainPID,NRestarts,WatchdogUSec,WatchdogTimestampMonotonic
step watchdog test "$(prop spited.service ActiveState)" = active -a "$(prop spited.service MainPID)" = "$pid" \
  -a "$(prop spited.service NRestarts)" = 0

echo "== reload"
systemctl reload spited.service
rc=$?
wait_active
systemctl show spited.service -p ActiveState,SubState,MainPID,StatusText
ctl status --socket "$sock" >/dev/null
answered=$?
step reload test $rc -eq 0 -a $answered -eq 0 -a "$(prop spited.service ActiveState)" = active \
  -a "$(prop spited.service MainPID)" = "$pid"

echo "== stop"
systemctl stop spited.service
rc=$?
systemctl show spited.service -p ActiveState,Result,ExecMainCode,ExecMainStatus,StatusText
step stop test $rc -eq 0 -a "$(prop spited.service ActiveState)" = inactive \
  -a "$(prop spited.service Result)" = success -a "$(prop spited.service ExecMainStatus)" = 0
ls -ld /run/spite "$sock"
step socket-kept test -S "$sock" -a "$(prop spited.socket ActiveState)" = active

echo "== started again by a connection to its socket"
ctl status --socket "$sock"
rc=$?
systemctl show spited.service -p ActiveState,MainPID
step reactivated test $rc -eq 0 -a "$(prop spited.service ActiveState)" = active
systemctl stop spited.service

echo "== directories"
stat -c '%U:%G %a %n' /var/lib/spite /var/lib/spite/models /var/lib/spite/models/stories260K.gguf \
  /etc/spite /etc/spite/kernels /run/spite
echo "== journal of spited.service"
journalctl -b -u spited.service -u spited.socket -u spited-http.socket --no-pager | tail -40
echo "== warnings of this boot"
journalctl -b -p warning --no-pager | tail -20
# Nothing about spite among them (sysusers conflicts, refused settings, failed reloads, ...).
step quiet-journal test -z "$(journalctl -b -p warning --no-pager -o cat | grep -i spite)"
echo "CHECK DONE"
