// Command kindnetd stands in for kind's kindnetd in kindcompare's kind
// node image: kindnetd's source is not a module the Go proxy serves, and
// its image cannot be pulled here. It does the part of kindnetd a
// one-node cluster's readiness waits for: once the API server answers
// (through the kubernetes Service, as kindnetd's in-cluster client does),
// it finds this node (the one whose InternalIP is HOST_IP) and writes the
// CNI configuration kindnetd writes: ptp with host-local IPAM on the
// node's PodCIDR, the eth0 MTU and portmap. It then checks every 10
// seconds, as kindnetd's loop does. It sets no masquerade rules and no
// routes to other nodes.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

const (
	saDir    = "/var/run/secrets/kubernetes.io/serviceaccount"
	confPath = "/etc/cni/net.d/10-kindnet.conflist"
)

func main() {
	hostIP := os.Getenv("HOST_IP")
	if hostIP == "" {
		log.Fatal("HOST_IP is not set")
	}
	client, server, err := inCluster()
	if err != nil {
		log.Fatal(err)
	}
	var written string
	for {
		conf, err := config(client, server, hostIP)
		switch {
		case err != nil:
			log.Print(err)
		case conf != written:
			if err := writeAtomic(confPath, conf); err != nil {
				log.Print(err)
				break
			}
			written = conf
			log.Printf("wrote %s", confPath)
		}
		if written == "" {
			time.Sleep(200 * time.Millisecond)
		} else {
			time.Sleep(10 * time.Second)
		}
	}
}

// inCluster returns a client with the pod's service account credentials
// and the API server's address.
func inCluster() (*http.Client, string, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, "", errors.New("not in a cluster: KUBERNETES_SERVICE_HOST/PORT unset")
	}
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return nil, "", err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, "", errors.New("no certificate in ca.crt")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}, "https://" + net.JoinHostPort(host, port), nil
}

// config returns the CNI configuration for the node whose InternalIP is
// hostIP, or an error while the API or the node's PodCIDR are not there.
func config(client *http.Client, server, hostIP string) (string, error) {
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return "", err
	}
	req, err := http.NewRequest("GET", server+"/api/v1/nodes", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("list nodes: %s", resp.Status)
	}
	var nodes struct {
		Items []struct {
			Spec struct {
				PodCIDR string `json:"podCIDR"`
			} `json:"spec"`
			Status struct {
				Addresses []struct{ Type, Address string } `json:"addresses"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&nodes); err != nil {
		return "", err
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == "InternalIP" && a.Address == hostIP {
				if n.Spec.PodCIDR == "" {
					return "", errors.New("this node has no PodCIDR yet")
				}
				return conflist(n.Spec.PodCIDR, mtu()), nil
			}
		}
	}
	return "", fmt.Errorf("no node has InternalIP %s", hostIP)
}

// conflist is kindnetd's CNI configuration for one single-stack PodCIDR.
func conflist(podCIDR string, mtu int) string {
	route := "0.0.0.0/0"
	if ip, _, err := net.ParseCIDR(podCIDR); err == nil && ip.To4() == nil {
		route = "::/0"
	}
	ptp := map[string]any{
		"type":   "ptp",
		"ipMasq": false,
		"ipam": map[string]any{
			"type":    "host-local",
			"dataDir": "/run/cni-ipam-state",
			"routes":  []any{map[string]string{"dst": route}},
			"ranges":  []any{[]any{map[string]string{"subnet": podCIDR}}},
		},
	}
	if mtu > 0 {
		ptp["mtu"] = mtu
	}
	data, _ := json.MarshalIndent(map[string]any{
		"cniVersion": "0.3.1",
		"name":       "kindnet",
		"plugins": []any{ptp, map[string]any{
			"type":         "portmap",
			"capabilities": map[string]bool{"portMappings": true},
		}},
	}, "", "  ")
	return string(data)
}

// mtu returns eth0's MTU, 0 when there is no eth0.
func mtu() int {
	i, err := net.InterfaceByName("eth0")
	if err != nil {
		return 0
	}
	return i.MTU
}

// writeAtomic writes data to path through a file the CNI loader ignores,
// renamed into place.
func writeAtomic(path, data string) error {
	tmp := path + ".temp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
