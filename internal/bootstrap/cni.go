package bootstrap

import (
	"encoding/json"
	"fmt"
	"strings"
)

// CNIConfigPath is where a node's pod network configuration is written.
const CNIConfigPath = "/etc/cni/net.d/10-kindtest.conflist"

// The parts of a CNI network configuration list that kindtest writes.
type (
	cniConfigList struct {
		CNIVersion string `json:"cniVersion"`
		Name       string `json:"name"`
		Plugins    []any  `json:"plugins"`
	}
	cniBridge struct {
		Type        string  `json:"type"`
		Bridge      string  `json:"bridge"`
		IsGateway   bool    `json:"isGateway"`
		IPMasq      bool    `json:"ipMasq"`
		HairpinMode bool    `json:"hairpinMode"`
		IPAM        cniIPAM `json:"ipam"`
	}
	cniIPAM struct {
		Type   string         `json:"type"`
		Ranges [][]cniRange   `json:"ranges"`
		Routes []cniIPAMRoute `json:"routes"`
	}
	cniRange struct {
		Subnet string `json:"subnet"`
	}
	cniIPAMRoute struct {
		Dst string `json:"dst"`
	}
	cniPortMap struct {
		Type         string          `json:"type"`
		Capabilities map[string]bool `json:"capabilities"`
	}
)

// CNIConfig is the pod network configuration list of a node whose pods
// take their addresses from subnets, one per IP family: a bridge, kt0,
// that is the pods' gateway, and host ports. Masquerading is not the
// bridge plugin's: it is one iptables rule per node and family, as are
// the routes to the other nodes' pod ranges, set up with the
// configuration before the node boots.
func CNIConfig(subnets ...string) []byte {
	var ranges [][]cniRange
	var routes []cniIPAMRoute
	for _, s := range subnets {
		ranges = append(ranges, []cniRange{{Subnet: s}})
		dst := "0.0.0.0/0"
		if strings.Contains(s, ":") {
			dst = "::/0"
		}
		routes = append(routes, cniIPAMRoute{Dst: dst})
	}
	list := cniConfigList{
		CNIVersion: "1.0.0",
		Name:       "kindtest",
		Plugins: []any{
			cniBridge{
				Type:        "bridge",
				Bridge:      "kt0",
				IsGateway:   true,
				IPMasq:      false,
				HairpinMode: true,
				IPAM: cniIPAM{
					Type:   "host-local",
					Ranges: ranges,
					Routes: routes,
				},
			},
			cniPortMap{Type: "portmap", Capabilities: map[string]bool{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		// Only strings, booleans, slices and structs of them are in it.
		panic(fmt.Sprintf("bootstrap: CNI configuration: %v", err))
	}
	return append(b, '\n')
}
