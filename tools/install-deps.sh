#!/usr/bin/env bash
# Installs the Debian 12 packages spite builds and tests with. Idempotent: apt-get runs only when
# a package is missing, so a machine that has everything is left untouched.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache git
  catch2 nlohmann-json3-dev libtomlplusplus-dev libpcre2-dev
  libboost1.81-dev libsystemd-dev libsdbus-c++-dev libze-dev
  clang-14 libclang-rt-14-dev dbus-daemon
  systemd-container debootstrap
  g++-aarch64-linux-gnu qemu-user
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
