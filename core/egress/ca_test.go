package egress

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// credentialRig is a proxy that adds an Authorization header for an HTTPS
// server of its own test CA, and a client that trusts Baton's CA.
type credentialRig struct {
	*rig
	srv    *httptest.Server
	client *http.Client
}

const testToken = "tok-0123456789abcdef"

func newCredentialRig(t *testing.T, trustUpstream bool) *credentialRig {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+testToken {
			fmt.Fprintf(w, "auth-ok %s %s", r.Method, r.URL.Path)
			return
		}
		http.Error(w, "auth-missing", http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	hostport := strings.TrimPrefix(srv.URL, "https://")
	certPEM, keyPEM, err := NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := ParseCA(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	upstream := x509.NewCertPool()
	if trustUpstream {
		upstream.AddCert(srv.Certificate())
	}
	r := newRig(t, Config{
		CA: ca, UpstreamRoots: upstream, SystemRootsPEM: []byte("# system roots\n"),
		Credentials: []Credential{{Match: mustRule(t, hostport), Header: "Authorization", Value: "Bearer " + testToken}},
	}, nil, hostport)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: r.addr}),
		TLSClientConfig: &tls.Config{RootCAs: roots},
	}}
	t.Cleanup(client.CloseIdleConnections)
	return &credentialRig{rig: r, srv: srv, client: client}
}

func TestCredentialAdded(t *testing.T) {
	r := newCredentialRig(t, true)
	for _, path := range []string{"/one", "/two"} { // one tunnel, two requests
		req, _ := http.NewRequest("GET", r.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer forged-by-the-sandbox")
		resp, err := r.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "auth-ok GET "+path {
			t.Errorf("GET %s through the terminating proxy: %d %q", path, resp.StatusCode, body)
		}
	}
	r.client.CloseIdleConnections()
	rec := r.audit.wait(t, 1)[0]
	if rec.Outcome != Allowed || rec.Method != "CONNECT" || rec.Reason != "" || rec.BytesUp == 0 || rec.BytesDown == 0 {
		t.Errorf("audit: %+v", rec)
	}
	if strings.Contains(fmt.Sprintf("%+v", rec), testToken) {
		t.Errorf("the audit record holds the token: %+v", rec)
	}
	bundle, err := readFile(r.p.caFile)
	if err != nil || !strings.HasPrefix(bundle, "# system roots\n") || !strings.Contains(bundle, "BEGIN CERTIFICATE") || strings.Contains(bundle, "PRIVATE KEY") {
		t.Errorf("the sandbox's CA bundle: %v\n%s", err, bundle)
	}
}

// TestCredentialUpstreamVerified: the host's certificate is checked; one
// that the upstream roots do not vouch for gets no credential.
func TestCredentialUpstreamVerified(t *testing.T) {
	r := newCredentialRig(t, false)
	resp, err := r.client.Get(r.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "certificate") {
		t.Errorf("an upstream of an unknown CA: %d %q", resp.StatusCode, body)
	}
}

// TestCredentialNeedsTrust: a client that does not trust Baton's CA gets
// no answer and sends nothing on.
func TestCredentialNeedsTrust(t *testing.T) {
	r := newCredentialRig(t, true)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: r.addr})}}
	if _, err := client.Get(r.srv.URL + "/"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client that does not trust the CA: %v", err)
	}
	if rec := r.audit.wait(t, 1)[0]; !strings.Contains(rec.Reason, "TLS with the client failed") || rec.BytesUp != 0 {
		t.Errorf("audit: %+v", rec)
	}
}

func TestParseCARefusesALeaf(t *testing.T) {
	certPEM, keyPEM, err := NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := ParseCA(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.leaf("example.com", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: certPool(certPEM)}); err != nil {
		t.Errorf("a leaf does not verify against its CA: %v", err)
	}
	if _, err := ParseCA(certPEM, []byte("garbage")); err == nil {
		t.Error("a CA with a garbage key was accepted")
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(leaf.PrivateKey)
	leafPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Certificate[0]})
	if _, err := ParseCA(leafPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})); err == nil || !strings.Contains(err.Error(), "not a CA") {
		t.Errorf("a host certificate as the CA: %v", err)
	}
}

func certPool(pemData []byte) *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(pemData)
	return p
}
