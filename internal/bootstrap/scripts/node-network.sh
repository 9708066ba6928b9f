#!/bin/sh
# Prepares a node's networking before it boots: the iptables flavour the
# engine used, cluster DNS that does not loop and, unless the test brings
# its own CNI plugin, kindtest's pod network.
#
# Usage: node-network.sh [CNI_CONFIG on|off [masquerade POD_SUBNET CLUSTER_POD_SUBNET]... [route DST VIA]...]
# CNI_CONFIG is the bridge configuration list, on passes bridged traffic
# through netfilter, each masquerade names the node's pod range of an IP
# family and all nodes' ranges of that family (traffic leaving them is
# masqueraded), and each route leads to another node's pod range. Without
# arguments, only the iptables flavour and DNS are set up.
set -eu

# Use the iptables flavour (legacy or nft) that holds the engine's rules, so
# that kube-proxy's rules and the engine's live in the same tables.
legacy=$(iptables-legacy-save 2>/dev/null | grep -c '^-' || true)
nft=$(iptables-nft-save 2>/dev/null | grep -c '^-' || true)
if [ "$legacy" -gt "$nft" ]; then mode=legacy; else mode=nft; fi
update-alternatives --set iptables /usr/sbin/iptables-$mode >/dev/null
update-alternatives --set ip6tables /usr/sbin/ip6tables-$mode >/dev/null

# The engine's DNS server answers on 127.0.0.11 only inside this network
# namespace: pods (CoreDNS among them) would query themselves. Serve it on
# the network gateway's address instead, also for traffic from pods.
gw=$(ip -4 route show default | cut -d' ' -f3)
sysctl -qw net.ipv4.conf.all.route_localnet=1
iptables-save \
  | sed -e "s/-d 127.0.0.11/-d $gw/g" \
        -e 's/-A OUTPUT \(.*\) -j DOCKER_OUTPUT/&\n-A PREROUTING \1 -j DOCKER_OUTPUT/' \
        -e "s/--to-source :53/--to-source $gw:53/g" \
  | iptables-restore
sed -e "s/127.0.0.11/$gw/" /etc/resolv.conf > /tmp/resolv.conf
cat /tmp/resolv.conf > /etc/resolv.conf

[ $# -gt 0 ] || exit 0

# kindtest's pod network: a bridge on the node's own ranges, masquerading
# for traffic leaving the pod network, and routes to the other nodes'.
mkdir -p /etc/cni/net.d
printf '%s' "$1" > /etc/cni/net.d/10-kindtest.conflist
bridge_netfilter=$2
shift 2
while [ $# -ge 3 ]; do
  case $1 in
  masquerade)
    case $2 in
    *:*)
      # The engine enables IPv6 on the node's own interface only: the
      # bridge and the pods' interfaces made later need it too. The node
      # forwards its pods' IPv6 traffic as it does their IPv4.
      sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.default.disable_ipv6=0 net.ipv6.conf.all.forwarding=1
      ip6tables -t nat -A POSTROUTING -s "$2" ! -d "$3" -j MASQUERADE
      ;;
    *) iptables -t nat -A POSTROUTING -s "$2" ! -d "$3" -j MASQUERADE ;;
    esac
    ;;
  route) ip route replace "$2" via "$3" ;;
  *)
    echo "node-network.sh: unknown word $1" >&2
    exit 2
    ;;
  esac
  shift 3
done
if [ "$bridge_netfilter" = on ]; then
  # The NetworkPolicy agent's netfilter hooks see traffic between pods of
  # one node only if bridged packets go through them. The settings exist
  # where the host has br_netfilter loaded; without it, policies still
  # hold between nodes.
  # In a user namespace (a rootless engine) they may not be the node's to
  # set.
  if [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then
    sysctl -qw net.bridge.bridge-nf-call-iptables=1 net.bridge.bridge-nf-call-ip6tables=1 ||
      grep -Eq '^ +0 +0 +4294967295$' /proc/self/uid_map || exit 1
  fi
fi
