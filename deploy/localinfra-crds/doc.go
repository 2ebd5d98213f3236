// Package localinfracrds embeds the CRDs of bex's Cluster API
// infrastructure provider for this machine (infrastructure.bex.co:
// LocalCluster, LocalMachine, LocalMachineTemplate), generated from
// apis/infrastructure by hack/generate.sh. They are installed where the
// local fleet runs (make run, the fleet tests), never by the chart.
package localinfracrds
