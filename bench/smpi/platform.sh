#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Write a SimGrid platform and a hostfile for N hosts of R ranks each.
#   bench/smpi/platform.sh cluster|fattree GBIT N R OUT_PREFIX
# OUT_PREFIX.xml, OUT_PREFIX.hosts (each host listed R times: smpirun puts R consecutive
# ranks on it, so MPI_Comm_split_type(SHARED) sees nodes of R ranks).
#  cluster: a crossbar (no backbone): every host has its own full-duplex link (SPLITDUPLEX)
#           of GBIT Gbit/s and 1 us; a message between hosts crosses 2 links: alpha = 2 us.
#  fattree: a two-level fat tree, 8 hosts per leaf switch, 2 top switches, 2 cables from
#           each leaf to each top switch: 4 uplinks for 8 hosts (2:1 oversubscribed); every
#           link GBIT Gbit/s, 0.5 us: 1 us within a leaf, 2 us across leaves.
# Ranks on one host talk through a loopback of 50 GB/s, 0.1 us (shared memory).
# Host speed 1 Gflop/s: with smpirun --cfg=smpi/host-speed:1Gf the measured CPU time of a
# rank's computation is simulated 1:1.
set -euo pipefail
kind=$1 gbit=$2 n=$3 r=$4 out=$5
case $kind in
  cluster) topo="lat=\"1us\" sharing_policy=\"SPLITDUPLEX\"" ;;
  fattree)
    leaf=8
    [ "$n" -ge $leaf ] || leaf=$n
    [ $((n % leaf)) = 0 ] || { echo "platform.sh: $n hosts are not whole leaves of $leaf" >&2; exit 1; }
    topo="lat=\"0.5us\" sharing_policy=\"SPLITDUPLEX\" topology=\"FAT_TREE\" topo_parameters=\"2;$leaf,$((n / leaf));1,2;1,2\"" ;;
  *) echo "platform.sh: cluster or fattree" >&2; exit 1 ;;
esac
cat >"$out.xml" <<XML
<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <cluster id="c" prefix="node-" suffix="" radical="0-$((n - 1))" speed="1Gf" core="$r"
           bw="${gbit}Gbps" $topo loopback_bw="50GBps" loopback_lat="0.1us"/>
</platform>
XML
: >"$out.hosts"
for ((i = 0; i < n; i++)); do
    for ((j = 0; j < r; j++)); do echo "node-$i" >>"$out.hosts"; done
done
