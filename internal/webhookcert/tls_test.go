package webhookcert

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net/http"
	"strings"
	"testing"

	certutil "k8s.io/client-go/util/cert"
)

// A real TLS server on GetCertificate: a client that trusts CABundle()
// reaches it by the service's DNS name and by the IP SAN, a client asking
// for another name is refused, and after a renewal (fake clock moved on) the
// next connection gets the new certificate.
func TestServeTLS(t *testing.T) {
	e := newEnv(t)
	m := e.ensure(func(c *Config) { c.DNSNames = []string{testDNS, "127.0.0.1"} })

	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: m.GetCertificate, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		// The refused client's failed handshake is expected.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()

	// get connects anew (no keep-alive), so every call is a handshake.
	get := func(serverName string) (*x509.Certificate, error) {
		pool, err := certutil.NewPoolFromBytes(m.CABundle())
		if err != nil {
			return nil, err
		}
		client := &http.Client{Transport: &http.Transport{
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: serverName, Time: e.clk.Now, MinVersion: tls.VersionTLS12},
		}}
		resp, err := client.Get("https://" + addr + "/")
		if err != nil {
			return nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK || string(body) != "ok" {
			return nil, errors.New("unexpected response " + resp.Status)
		}
		return resp.TLS.PeerCertificates[0], nil
	}

	first, err := get(testDNS)
	if err != nil {
		t.Fatalf("connecting as %s: %v", testDNS, err)
	}
	if byIP, err := get(""); err != nil {
		t.Fatalf("connecting by IP: %v", err)
	} else if !byIP.Equal(first) {
		t.Errorf("another certificate by IP")
	}
	var unknown x509.HostnameError
	if _, err := get("other.muster-system.svc"); !errors.As(err, &unknown) {
		t.Errorf("connecting as another name: %v, want a host name error", err)
	}
	if _, err := get(testDNS); err != nil {
		t.Fatalf("connecting again: %v", err)
	}

	e.clk.Step(DefaultValidity - DefaultRenewBefore)
	if err := m.Ensure(e.ctx); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	renewed, err := get(testDNS)
	if err != nil {
		t.Fatalf("connecting after the renewal: %v", err)
	}
	if renewed.Equal(first) {
		t.Fatalf("still the first certificate after the renewal")
	}
	if want := leafOf(t, e.secret()); !renewed.Equal(want) {
		t.Errorf("served serial %x, the Secret holds %x", renewed.SerialNumber, want.SerialNumber)
	}
	if !renewed.NotAfter.After(first.NotAfter) || !strings.Contains(renewed.Issuer.CommonName, ManagedBy) {
		t.Errorf("renewed certificate ends %v (first %v), issuer %q", renewed.NotAfter, first.NotAfter, renewed.Issuer.CommonName)
	}
}
