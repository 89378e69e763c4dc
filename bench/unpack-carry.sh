#!/usr/bin/env bash
# On the device: restores the binaries `bench/prepare-carry.sh` packed into .carry/bins.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f .carry/bins.tar.xz ]; then xz -dc .carry/bins.tar.xz | tar -C .carry -xf -; fi
