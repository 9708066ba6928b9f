package kindtest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestUnitHostServerPointAt(t *testing.T) {
	s := &HostServer{ip: "172.18.0.1", port: 40001, service: "kindtest-host-40001", probe: "/kindtest.io/probe/", caPEM: []byte("PEM")}
	ca := base64.StdEncoding.EncodeToString([]byte("PEM"))
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hooks := write("hooks.yaml", `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: v}
webhooks:
  - name: a.example.com
    clientConfig: {service: {namespace: x, name: y, path: /validate}}
  - name: b.example.com
    clientConfig: {url: "https://somewhere:8443/check?x=1"}
  - name: c.example.com
    clientConfig: {service: {namespace: x, name: y}}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.g.example.com}
spec: {group: g.example.com, version: v1, insecureSkipTLSVerify: true, service: {namespace: a, name: b}}
`)
	objs, err := s.readObjects([]string{hooks})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 {
		t.Fatalf("%d objects", len(objs))
	}
	wh := objs[0].doc["webhooks"].([]any)
	if len(wh) != 4 || wh[0].(map[string]any)["name"] != "probe.webhook.kindtest.io" {
		t.Fatalf("want the probe first and three webhooks after it: %v", wh)
	}
	for i, want := range []string{"https://172.18.0.1:40001/validate", "https://172.18.0.1:40001/check", "https://172.18.0.1:40001/"} {
		cc := wh[i+1].(map[string]any)["clientConfig"].(map[string]any)
		if cc["url"] != want || cc["caBundle"] != ca || cc["service"] != nil {
			t.Errorf("webhook %d: clientConfig %v, want url %s with the CA", i, cc, want)
		}
	}
	probe := wh[0].(map[string]any)
	if sel := probe["objectSelector"].(map[string]any)["matchLabels"].(map[string]any)[probeLabel]; sel != objs[0].probe || objs[0].probe == "" {
		t.Errorf("probe selector %v, probe %q", sel, objs[0].probe)
	}
	if !strings.HasSuffix(probe["clientConfig"].(map[string]any)["url"].(string), s.probe+objs[0].probe) {
		t.Errorf("probe url %v", probe["clientConfig"])
	}
	spec := objs[1].doc["spec"].(map[string]any)
	if svc := spec["service"].(map[string]any); svc["name"] != "kindtest-host-40001" || svc["namespace"] != "default" || svc["port"] != 443 || spec["caBundle"] != ca || spec["insecureSkipTLSVerify"] != nil {
		t.Errorf("APIService spec %v", spec)
	}
	if objs[1].resource != "apiservices.apiregistration.k8s.io" || objs[0].resource != "validatingwebhookconfigurations.admissionregistration.k8s.io" {
		t.Errorf("resources %q %q", objs[0].resource, objs[1].resource)
	}

	for _, tc := range []struct{ name, body, want string }{
		{"deployment", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n", "found Deployment"},
		{"v1beta1", "apiVersion: admissionregistration.k8s.io/v1beta1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: d}\n", "Install takes"},
		{"no name", "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nspec: {}\n", "without metadata.name"},
		{"no webhooks", "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {name: m}\n", "has no webhooks"},
		{"conversion without webhook", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: as.g.io}\nspec: {group: g.io, names: {plural: as, kind: A}, conversion: {strategy: Webhook}, versions: [{name: v1, served: true}]}\n", "spec.conversion.webhook is missing"},
		{"twice", "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {name: x}\nspec: {}\n---\napiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {name: x}\nspec: {}\n", "also in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.readObjects([]string{write(tc.name+".yaml", tc.body)})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.name+".yaml") {
				t.Errorf("error %v, want one naming the file and saying %q", err, tc.want)
			}
		})
	}
	crd := write("crd.yaml", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: as.g.io}\nspec: {group: g.io, names: {plural: as, kind: A}, conversion: {strategy: Webhook, webhook: {conversionReviewVersions: [v1], clientConfig: {service: {name: s, namespace: n, path: /convert}}}}, versions: [{name: v1, served: true}]}\n")
	objs, err = s.readObjects([]string{crd})
	if err != nil || objs[0].crd == nil {
		t.Fatalf("%v %v", objs, err)
	}
	cc := objs[0].doc["spec"].(map[string]any)["conversion"].(map[string]any)["webhook"].(map[string]any)["clientConfig"].(map[string]any)
	if cc["url"] != "https://172.18.0.1:40001/convert" || cc["caBundle"] != ca {
		t.Errorf("conversion clientConfig %v", cc)
	}
}

// The serving certificate is trusted through CABundle for the address and
// for every name of the Service, and the probe path denies.
func TestUnitHostServerCertificate(t *testing.T) {
	s := &HostServer{ip: "127.0.0.1", service: "kindtest-host-1"}
	caPEM, cert, err := servingCertificate(s.ip, s.dnsNames(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/kindtest.io/probe/", denyProbe)
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	for _, name := range append([]string{"127.0.0.1"}, s.dnsNames()...) {
		conn, err := tls.Dial("tcp", "127.0.0.1:"+port, &tls.Config{RootCAs: pool, ServerName: name})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		conn.Close()
	}
	if _, err := tls.Dial("tcp", "127.0.0.1:"+port, &tls.Config{RootCAs: pool, ServerName: "other.default.svc"}); err == nil {
		t.Error("a name the certificate does not hold was accepted")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Post("https://127.0.0.1:"+port+"/kindtest.io/probe/abc", "application/json", strings.NewReader(`{"request":{"uid":"u1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var review struct {
		Response struct {
			UID     string `json:"uid"`
			Allowed bool   `json:"allowed"`
			Status  struct {
				Message string `json:"message"`
			} `json:"status"`
		} `json:"response"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil {
		t.Fatal(err)
	}
	if review.Response.UID != "u1" || review.Response.Allowed || review.Response.Status.Message != probeDenial+"/kindtest.io/probe/abc" {
		t.Errorf("probe answer %+v", review.Response)
	}
}
