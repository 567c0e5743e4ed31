#!/usr/bin/env bash
# System packages physync needs on Debian/Ubuntu: the X11/OpenGL libraries the viewer's window loads at run time,
# and Xvfb for the headless screenshot test. Installs only what is missing.
set -euo pipefail

packages=(xvfb xauth libgl1 libegl1 libgl1-mesa-dri libx11-6 libxcursor1 libxrandr2 libxi6 libxkbcommon-x11-0)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
