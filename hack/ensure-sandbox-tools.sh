#!/usr/bin/env bash
# Installs the Debian packages tenant sandboxes need: runc (also buildkitd's
# worker), iproute2 (the bridge and veth pairs), nftables (the sandbox
# firewall) and e2fsprogs (mkfs.ext4 for the builds' bounded disks).
APT_ENSURE_HINT="and run again as root, or run bin/bex-embedded --unsafe-no-sandbox on a single-user machine" \
	exec bash "$(dirname "$0")/apt-ensure.sh" "tenant sandboxes" runc=runc ip=iproute2 nft=nftables mkfs.ext4=e2fsprogs
