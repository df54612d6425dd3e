#!/usr/bin/env bash
# systemd_nspawn_e2e: boots a real systemd (PID 1 in systemd-nspawn) on a Debian bookworm minbase
# root file system, installs spited, spitectl, the units, sysusers.d and tmpfiles.d entries as a
# package would, and lets a oneshot unit inside check the service: READY, socket activation, the
# hardened identity, the D-Bus name, spitectl status / run, group access, watchdog, reload, stop,
# and a start by socket activation. The unit writes /result.txt and powers the container off;
# this script asserts every step from it.
#
# usage: nspawn_e2e.sh SOURCE_DIR SPITED SPITECTL PLUGIN
#   PLUGIN  a CPU kernel plug-in (generic/generic/x86_64) installed under /etc/spite/kernels, so
#           that dlopen from a sealed memfd runs under MemoryDenyWriteExecute=yes
# environment:
#   SPITE_SHARED_DIR / SPITE_SHARED_DIR_DEFAULT   shared test data (models/stories260K.gguf)
#   SPITE_ROOTFS_CACHE    the cached root file system (default $XDG_CACHE_HOME/spite/rootfs-bookworm)
#   SPITE_DEBIAN_MIRROR   default http://deb.debian.org/debian
#
# Exit status 77 (ctest SKIP_RETURN_CODE) when the machine lacks what the test cannot provide
# itself: root, systemd-nspawn, or (first run only) debootstrap and the Debian mirror.
set -euo pipefail
skip=77
usage="usage: nspawn_e2e.sh SOURCE_DIR SPITED SPITECTL PLUGIN"
src=$(readlink -f "${1:?$usage}")
spited=$(readlink -f "${2:?$usage}")
spitectl=$(readlink -f "${3:?$usage}")
plugin=$(readlink -f "${4:?$usage}")
shared=${SPITE_SHARED_DIR:-${SPITE_SHARED_DIR_DEFAULT:-$src/../shared}}
model="$shared/models/stories260K.gguf"
cache=${SPITE_ROOTFS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/spite/rootfs-bookworm}
mirror=${SPITE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
boot_timeout=240

skip_because() { echo "SKIP: $*"; exit $skip; }
fail() { echo "FAIL: $*"; exit 1; }

[[ $(id -u) -eq 0 ]] || skip_because "systemd-nspawn needs root (running as uid $(id -u))"
command -v systemd-nspawn >/dev/null ||
  skip_because "systemd-nspawn not installed (package systemd-container, tools/install-deps.sh)"
command -v systemctl >/dev/null || skip_because "systemctl not installed (package systemd)"
for f in "$spited" "$spitectl"; do [[ -x "$f" ]] || fail "$f is not built"; done
[[ -f "$plugin" ]] || fail "$plugin is not built"
[[ -f "$model" ]] || fail "shared test model missing: $model (set SPITE_SHARED_DIR)"

# --- The cached root file system: Debian packages for systemd and for every library the binaries
# link (found through the host's dpkg), rebuilt when a package is missing from it. procps: the
# unit's ExecReload=/bin/kill.
packages=(systemd systemd-sysv dbus procps)
if command -v dpkg >/dev/null; then
  while read -r lib; do
    pkg=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null || true)
    pkg=$(grep ': /' <<<"$pkg" | head -1 | cut -d: -f1)
    [[ -n "$pkg" ]] || fail "$lib (linked by spited or spitectl) belongs to no Debian package"
    packages+=("$pkg")
  done < <(ldd "$spited" "$spitectl" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
fi
mapfile -t packages < <(printf '%s\n' "${packages[@]}" | sort -u)

cache_has_packages() {
  [[ -x "$cache/usr/lib/systemd/systemd" && -f "$cache/.spite-packages" ]] || return 1
  local p
  for p in "${packages[@]}"; do grep -qx "$p" "$cache/.spite-packages" || return 1; done
}

mkdir -p "$(dirname "$cache")"
exec 9>"$cache.lock"
flock 9  # one build of the cache at a time; runs sharing it wait here
if ! cache_has_packages; then
  command -v debootstrap >/dev/null ||
    skip_because "no cached root file system at $cache and debootstrap is not installed (tools/install-deps.sh)"
  wget_ok=0
  timeout 30 wget -q -T 20 -t 1 -O /dev/null "$mirror/dists/bookworm/Release" && wget_ok=1
  [[ $wget_ok -eq 1 ]] ||
    skip_because "no cached root file system at $cache and the Debian mirror $mirror cannot be reached"
  if [[ -f "$cache/.spite-packages" ]]; then  # keep what the old cache had
    mapfile -t packages < <(cat "$cache/.spite-packages" <(printf '%s\n' "${packages[@]}") | sort -u)
  fi
  echo "building the root file system in $cache (once): ${packages[*]}"
  rm -rf "$cache.new"
  started=$SECONDS
  include=$(IFS=,; echo "${packages[*]}")
  if ! debootstrap --variant=minbase --include="$include" bookworm "$cache.new" "$mirror" >"$cache.new.log" 2>&1; then
    tail -30 "$cache.new.log"
    rm -rf "$cache.new"
    fail "debootstrap failed (log above)"
  fi
  rm -rf "$cache.new"/var/cache/apt/archives/*.deb "$cache.new"/var/lib/apt/lists/* "$cache.new.log"
  printf '%s\n' "${packages[@]}" >"$cache.new/.spite-packages"
  rm -rf "$cache"
  mv "$cache.new" "$cache"
  echo "root file system built in $((SECONDS - started)) s"
fi
flock -s 9  # from here on the cache is only read

# --- This run's root: an overlay over the cache (a copy where overlayfs is not available).
work=$(mktemp -d "${TMPDIR:-/tmp}/spite-nspawn.XXXXXX")
root="$work/root"
cleanup() {
  mountpoint -q "$root" && umount "$root"
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$root" "$work/upper" "$work/overlay-work"
if ! mount -t overlay overlay -o "lowerdir=$cache,upperdir=$work/upper,workdir=$work/overlay-work" \
  "$root" 2>/dev/null; then
  cp -a "$cache/." "$root/"
fi

# --- Install as a package would: binaries, units, sysusers.d, tmpfiles.d, D-Bus policy.
install -m 0755 "$spited" "$root/usr/bin/spited"
install -m 0755 "$spitectl" "$root/usr/bin/spitectl"
for u in spited.service spited.socket spited-http.socket; do
  install -m 0644 "$src/systemd/$u" "$root/usr/lib/systemd/system/$u"
done
install -D -m 0644 "$src/systemd/spited-sysusers.conf" "$root/usr/lib/sysusers.d/spited.conf"
install -D -m 0644 "$src/systemd/spited-tmpfiles.conf" "$root/usr/lib/tmpfiles.d/spited.conf"
if [[ -f "$src/systemd/org.spite.Daemon1.conf" ]]; then
  install -D -m 0644 "$src/systemd/org.spite.Daemon1.conf" "$root/usr/share/dbus-1/system.d/org.spite.Daemon1.conf"
fi
missing=$(chroot "$root" /usr/bin/ldd /usr/bin/spited /usr/bin/spitectl | grep 'not found' || true)
[[ -z "$missing" ]] || fail "libraries missing from the root file system: $missing"

# What the administrator adds: the configuration, a model, a kernel plug-in.
install -D -m 0644 /dev/stdin "$root/etc/spite/spite.toml" <<'EOF'
[control]
socket = "/run/spite/spited.sock"
group = "spite"

[[model]]
name = "stories260K"
path = "/var/lib/spite/models/stories260K.gguf"
preload = true

[inference]
threads = 2
EOF
install -D -m 0644 "$model" "$root/var/lib/spite/models/stories260K.gguf"
install -D -m 0644 "$plugin" "$root/etc/spite/kernels/generic/generic/x86_64/$(basename "$plugin")"

# Test-only additions: a member of group spite and an outsider; a 1 s watchdog, so that the pings
# are really checked; the check unit and its script.
install -D -m 0644 /dev/stdin "$root/usr/lib/sysusers.d/spite-test.conf" <<'EOF'
u spitetester -
m spitetester spite
u spiteoutsider -
EOF
install -D -m 0644 /dev/stdin "$root/etc/systemd/system/spited.service.d/test-watchdog.conf" <<'EOF'
[Service]
WatchdogSec=1s
EOF
install -D -m 0644 /dev/stdin "$root/etc/systemd/system/spite-check.service" <<'EOF'
[Unit]
Description=check spited, then power off
Wants=spited.service
After=spited.service
SuccessAction=poweroff
FailureAction=poweroff

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/spite-check
TimeoutStartSec=150s

[Install]
WantedBy=multi-user.target
EOF
install -D -m 0755 "$src/tests/systemd/check_in_container.sh" "$root/usr/local/sbin/spite-check"
systemctl --root="$root" enable spited.service spite-check.service >/dev/null 2>&1 ||
  fail "systemctl --root enable spited.service failed"

# --- Boot. --keep-unit: no host systemd to register a scope with; --register=no: no machined;
# --private-network: the container sees only its own loopback. timeout: nspawn can hang on a
# container that did not power off.
started=$SECONDS
rc=0
timeout -k 10 "$boot_timeout" systemd-nspawn -q --keep-unit --register=no --private-network \
  -D "$root" -b >"$work/nspawn.log" 2>&1 </dev/null || rc=$?
elapsed=$((SECONDS - started))
result="$root/result.txt"

show_and_fail() {
  echo "---- /result.txt"
  cat "$result" 2>/dev/null || echo "(none)"
  echo "---- systemd-nspawn output (last 60 lines)"
  tail -60 "$work/nspawn.log"
  fail "$*"
}
[[ $rc -ne 124 && $rc -ne 137 ]] || show_and_fail "the container did not power off within ${boot_timeout} s"
[[ -f "$result" ]] || show_and_fail "no /result.txt: the check unit did not run (nspawn exit status $rc)"
grep -q '^CHECK DONE$' "$result" || show_and_fail "the check did not finish"

steps=(ready identity activated socket-file dbus-name status plugin run group-member outsider-refused
       watchdog reload stop socket-kept reactivated quiet-journal)
bad=()
for s in "${steps[@]}"; do
  grep -qx "STEP $s: ok" "$result" || bad+=("$s")
done
[[ ${#bad[@]} -eq 0 ]] || show_and_fail "steps failed: ${bad[*]}"
grep '^STEP ' "$result"
echo "PASS: spited under systemd in systemd-nspawn: ${#steps[@]} steps in ${elapsed} s of boot"
