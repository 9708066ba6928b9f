package kindtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/poll"
)

// apiClient is the little of a Kubernetes client that readiness checks
// need: authenticated GETs decoded from JSON. Keeping it this small keeps
// client-go out of the library's dependencies.
type apiClient struct {
	server string
	http   *http.Client
}

// kubeconfigFields pulls the server and the base64 credentials out of a
// kubeadm-written kubeconfig, which holds exactly one cluster and user.
func kubeconfigFields(kubeconfig []byte) (map[string]string, error) {
	want := map[string]bool{"server": true, "certificate-authority-data": true, "client-certificate-data": true, "client-key-data": true}
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(kubeconfig)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if ok && want[k] {
			out[k] = strings.TrimSpace(v)
		}
	}
	for k := range want {
		if out[k] == "" {
			return nil, fmt.Errorf("kubeconfig has no %s", k)
		}
	}
	return out, nil
}

// rewriteServer points a kubeconfig at another API server address.
func rewriteServer(kubeconfig []byte, server string) ([]byte, error) {
	f, err := kubeconfigFields(kubeconfig)
	if err != nil {
		return nil, err
	}
	return []byte(strings.Replace(string(kubeconfig), "server: "+f["server"], "server: "+server, 1)), nil
}

// decodeField decodes the base64 field k of kubeconfigFields' result.
func decodeField(f map[string]string, k string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(f[k])
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", k, err)
	}
	return b, nil
}

// kubeconfigCA returns the PEM of the certificate authority a
// kubeadm-written kubeconfig trusts: the cluster's CA.
func kubeconfigCA(kubeconfig []byte) ([]byte, error) {
	f, err := kubeconfigFields(kubeconfig)
	if err != nil {
		return nil, err
	}
	return decodeField(f, "certificate-authority-data")
}

func newAPIClient(kubeconfig []byte) (*apiClient, error) {
	f, err := kubeconfigFields(kubeconfig)
	if err != nil {
		return nil, err
	}
	ca, err := decodeField(f, "certificate-authority-data")
	if err != nil {
		return nil, err
	}
	crt, err := decodeField(f, "client-certificate-data")
	if err != nil {
		return nil, err
	}
	key, err := decodeField(f, "client-key-data")
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig client certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("kubeconfig certificate authority: no certificate")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}}
	return &apiClient{server: f["server"], http: &http.Client{Transport: tr, Timeout: 10 * time.Second}}, nil
}

// statusError is a non-2xx answer from the API server.
type statusError struct {
	method string
	path   string
	code   int
	body   string
}

func (e *statusError) Error() string {
	method := e.method
	if method == "" {
		method = http.MethodGet
	}
	return fmt.Sprintf("%s %s: %d: %s", method, e.path, e.code, strings.TrimSpace(e.body))
}

// isStatus reports whether err is an answer of the API server with the
// given HTTP status code.
func isStatus(err error, code int) bool {
	var se *statusError
	return errors.As(err, &se) && se.code == code
}

// get fetches path and decodes the JSON answer into out (when non-nil).
func (a *apiClient) get(ctx context.Context, path string, out any) error {
	return a.do(ctx, http.MethodGet, path, nil, out)
}

// do sends a request with body (JSON, when non-nil) and decodes the JSON
// answer into out (when non-nil).
func (a *apiClient) do(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.server+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return &statusError{method: method, path: path, code: resp.StatusCode, body: tail(string(data), 512)}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

func (a *apiClient) close() { a.http.CloseIdleConnections() }

// waitCondition waits until the object at path has condition cond True.
// On failure it says the object's conditions and the last answer.
func waitCondition(ctx context.Context, api *apiClient, path, cond string) (string, error) {
	var obj struct {
		Status struct {
			Conditions []condition `json:"conditions"`
		} `json:"status"`
	}
	// seen are the conditions of the last answer: an answer cut short by
	// the deadline keeps them.
	var seen []condition
	var last error
	err := poll.Until(ctx, 20*time.Millisecond, 500*time.Millisecond, func() (bool, error) {
		obj.Status.Conditions = nil
		if last = api.get(ctx, path, &obj); last != nil {
			return false, nil
		}
		seen = obj.Status.Conditions
		return slices.ContainsFunc(seen, func(c condition) bool { return c.Type == cond && c.Status == "True" }), nil
	})
	if err == nil {
		return "", nil
	}
	var conds []string
	for _, c := range seen {
		conds = append(conds, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	if len(conds) == 0 {
		conds = append(conds, "none yet")
	}
	if last != nil {
		conds = append(conds, "last answer: "+last.Error())
	}
	return strings.Join(conds, "; "), err
}

type condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type nodeList struct {
	Items []node `json:"items"`
}

type node struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		PodCIDR string `json:"podCIDR"`
	} `json:"spec"`
	Status struct {
		Conditions []condition `json:"conditions"`
		NodeInfo   struct {
			KubeletVersion string `json:"kubeletVersion"`
		} `json:"nodeInfo"`
	} `json:"status"`
}

type deployment struct {
	Spec struct {
		Replicas *int `json:"replicas"`
	} `json:"spec"`
	Status struct {
		ReadyReplicas   int `json:"readyReplicas"`
		UpdatedReplicas int `json:"updatedReplicas"`
	} `json:"status"`
}

type podList struct {
	Items []struct {
		Metadata struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			NodeName string `json:"nodeName"`
		} `json:"spec"`
		Status struct {
			Phase             string      `json:"phase"`
			PodIP             string      `json:"podIP"`
			Conditions        []condition `json:"conditions"`
			ContainerStatuses []struct {
				Name  string `json:"name"`
				Ready bool   `json:"ready"`
				State map[string]struct {
					Reason  string `json:"reason"`
					Message string `json:"message"`
				} `json:"state"`
			} `json:"containerStatuses"`
		} `json:"status"`
	} `json:"items"`
}
