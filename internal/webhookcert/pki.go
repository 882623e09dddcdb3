package webhookcert

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// backdate is how far before "now" a certificate starts, so that an API
// server whose clock is a little behind ours accepts it at once.
const backdate = 5 * time.Minute

// material is one consistent set of certificates: what the Secret holds and
// what the Manager serves.
type material struct {
	// caBundle is ca.crt: the current CA first, then earlier CAs that are
	// still valid (kept while a CA is replaced).
	caBundle []byte
	caKey    []byte
	certPEM  []byte
	keyPEM   []byte
	// cert is certPEM and keyPEM parsed, with Leaf set.
	cert *tls.Certificate
}

// authority is a parsed CA with its key.
type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
	// previous are the other certificates of the bundle.
	previous []*x509.Certificate
}

// newKey makes the key of a CA or a serving certificate. P-256: every API
// server and Go TLS stack supports it, and it is cheap to make.
func newKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating key: %w", err)
	}
	pemKey, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding key: %w", err)
	}
	return key, pemKey, nil
}

func serialNumber() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generating serial number: %w", err)
	}
	return serial.Add(serial, big.NewInt(1)), nil
}

// newAuthority makes a self-signed CA valid from now for validity.
// certutil.NewSelfSignedCACert is not used: it reads the wall clock and fixes
// ten years, and both must follow the Config here.
func newAuthority(now time.Time, validity time.Duration) (*authority, error) {
	key, _, err := newKey()
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s-ca@%d", ManagedBy, now.Unix())},
		NotBefore:             now.Add(-backdate).UTC(),
		NotAfter:              now.Add(validity).UTC(),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing new CA certificate: %w", err)
	}
	return &authority{cert: cert, key: key}, nil
}

// issue signs a serving certificate for dns and ips, valid from now for
// validity but never past the CA, and returns the material of the CA and it.
func (ca *authority) issue(now time.Time, validity time.Duration, dns []string, ips []net.IP) (*material, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	cn := ""
	if len(dns) > 0 {
		cn = dns[0]
	} else if len(ips) > 0 {
		cn = ips[0].String()
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     dns,
		IPAddresses:  ips,
		NotBefore:    now.Add(-backdate).UTC(),
		NotAfter:     notAfter.UTC(),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("creating serving certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing new serving certificate: %w", err)
	}
	return ca.material(now, leaf, key, keyPEM)
}

// material encodes the CA, the still valid previous CAs and a serving
// certificate.
func (ca *authority) material(now time.Time, leaf *x509.Certificate, key crypto.Signer, keyPEM []byte) (*material, error) {
	bundle := []*x509.Certificate{ca.cert}
	for _, p := range ca.previous {
		if now.Before(p.NotAfter) && !p.Equal(ca.cert) {
			bundle = append(bundle, p)
		}
	}
	caPEM, err := certutil.EncodeCertificates(bundle...)
	if err != nil {
		return nil, fmt.Errorf("encoding CA bundle: %w", err)
	}
	caKey, err := keyutil.MarshalPrivateKeyToPEM(ca.key)
	if err != nil {
		return nil, fmt.Errorf("encoding CA key: %w", err)
	}
	certPEM, err := certutil.EncodeCertificates(leaf)
	if err != nil {
		return nil, fmt.Errorf("encoding serving certificate: %w", err)
	}
	return &material{
		caBundle: caPEM,
		caKey:    caKey,
		certPEM:  certPEM,
		keyPEM:   keyPEM,
		cert:     &tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf},
	}, nil
}

// parseAuthority reads ca.crt (current CA first) and ca.key.
func parseAuthority(caPEM, keyPEM []byte) (*authority, error) {
	if len(caPEM) == 0 {
		return nil, fmt.Errorf("%s is missing", KeyCACert)
	}
	if len(keyPEM) == 0 {
		return nil, fmt.Errorf("%s is missing", KeyCAKey)
	}
	certs, err := certutil.ParseCertsPEM(caPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KeyCACert, err)
	}
	raw, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KeyCAKey, err)
	}
	key, ok := raw.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: a %T cannot sign", KeyCAKey, raw)
	}
	ca := &authority{cert: certs[0], key: key, previous: certs[1:]}
	if !ca.cert.IsCA {
		return nil, fmt.Errorf("the first certificate of %s is not a CA", KeyCACert)
	}
	if !publicKeysEqual(ca.cert.PublicKey, key.Public()) {
		return nil, fmt.Errorf("%s is not the key of the first certificate of %s", KeyCAKey, KeyCACert)
	}
	return ca, nil
}

// parseServing reads tls.crt and tls.key into a tls.Certificate with Leaf set.
func parseServing(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, fmt.Errorf("%s or %s is missing", KeyCert, KeyKey)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s and %s: %w", KeyCert, KeyKey, err)
	}
	if pair.Leaf == nil {
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", KeyCert, err)
		}
		pair.Leaf = leaf
	}
	return &pair, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}

// servingProblems says why leaf cannot be served as the certificate of ca
// for dns and ips at now, renewing renewBefore ahead; nil means it can.
func servingProblems(leaf *x509.Certificate, ca *x509.Certificate, now time.Time, renewBefore time.Duration, dns []string, ips []net.IP) []string {
	var problems []string
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		problems = append(problems, fmt.Sprintf("%s is not signed by the CA in %s", KeyCert, KeyCACert))
	}
	if got, want := sortedNames(leaf.DNSNames, leaf.IPAddresses), sortedNames(dns, ips); !slices.Equal(got, want) {
		problems = append(problems, fmt.Sprintf("%s is for %v, want %v", KeyCert, got, want))
	}
	if !now.Before(leaf.NotAfter.Add(-renewBefore)) {
		problems = append(problems, fmt.Sprintf("%s expires at %s, within %v", KeyCert, leaf.NotAfter.Format(time.RFC3339), renewBefore))
	}
	return problems
}

// authorityProblem says why ca must be replaced at now; "" means it is fine.
func authorityProblem(ca *x509.Certificate, now time.Time, renewBefore time.Duration) string {
	if !now.Before(ca.NotAfter.Add(-renewBefore)) {
		return fmt.Sprintf("the CA in %s expires at %s, within %v", KeyCACert, ca.NotAfter.Format(time.RFC3339), renewBefore)
	}
	return ""
}

func sortedNames(dns []string, ips []net.IP) []string {
	out := slices.Clone(dns)
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	slices.Sort(out)
	return out
}

// errNoCertificate is returned by GetCertificate before anything was loaded.
var errNoCertificate = errors.New("webhookcert: no serving certificate yet (Ensure has not succeeded)")
