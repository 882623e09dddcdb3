package webhookcert

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
)

// Defaults for the durations of Config. The serving certificate lives 90
// days and is renewed 30 days before it ends, so a pod-grouper that cannot
// reach the API server for weeks still serves a valid certificate, and a
// leaked serving key is useful for one quarter at most. The CA lives 5 years:
// replacing it is the one step that changes the caBundle the API server
// trusts, so it should be rare, but not so rare that its code path is never
// run on a real cluster. A CA is replaced RenewBefore before it ends too,
// and the old one stays in the bundle until it expires, so certificates it
// signed keep working on every replica during the change.
const (
	DefaultValidity    = 90 * 24 * time.Hour
	DefaultCAValidity  = 5 * 365 * 24 * time.Hour
	DefaultRenewBefore = 30 * 24 * time.Hour
)

// Config says where the certificate comes from.
//
// Self-managed mode (CertDir empty): the CA and the serving certificate live
// in the Secret SecretNamespace/SecretName, shared by every replica, and the
// CA is kept in the caBundle of every webhook of the MutatingWebhookConfiguration
// named WebhookConfiguration (none when empty, e.g. when the caller registers
// a URL webhook itself with CABundle()).
//
// CertDir mode: tls.crt and tls.key are read from CertDir (written by
// cert-manager, which also injects the caBundle); the Manager changes nothing
// in the cluster and ignores SecretNamespace, SecretName,
// WebhookConfiguration, DNSNames and the durations.
type Config struct {
	SecretNamespace string
	SecretName      string
	// WebhookConfiguration is the name of the MutatingWebhookConfiguration
	// whose webhooks get the CA bundle.
	WebhookConfiguration string
	// DNSNames are the names the serving certificate is for. An entry that
	// is an IP address (127.0.0.1 for a URL webhook in the sandbox) becomes
	// an IP SAN.
	DNSNames []string
	// CertDir, when set, holds tls.crt and tls.key (and optionally ca.crt)
	// managed by someone else.
	CertDir string
	// Validity of a serving certificate (DefaultValidity when zero). A
	// serving certificate never outlives its CA.
	Validity time.Duration
	// CAValidity of a CA (DefaultCAValidity when zero).
	CAValidity time.Duration
	// RenewBefore: a serving certificate or CA is replaced when it expires
	// within this duration (DefaultRenewBefore when zero).
	RenewBefore time.Duration
	// Clock (the real clock when nil) dates and checks certificates.
	Clock clock.PassiveClock
}

// withDefaults returns cfg with its zero durations and clock filled in and
// DNSNames normalized (lower case, sorted, without duplicates).
func (cfg Config) withDefaults() Config {
	if cfg.Validity == 0 {
		cfg.Validity = DefaultValidity
	}
	if cfg.CAValidity == 0 {
		cfg.CAValidity = DefaultCAValidity
	}
	if cfg.RenewBefore == 0 {
		cfg.RenewBefore = DefaultRenewBefore
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	names := make([]string, 0, len(cfg.DNSNames))
	for _, n := range cfg.DNSNames {
		names = append(names, strings.ToLower(strings.TrimSpace(n)))
	}
	slices.Sort(names)
	cfg.DNSNames = slices.Compact(names)
	return cfg
}

// validate checks a defaulted Config and names every bad field.
func (cfg Config) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("webhookcert: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if cfg.CertDir != "" {
		return nil
	}
	if cfg.SecretNamespace == "" {
		bad("SecretNamespace", "required when CertDir is empty")
	} else if msgs := validation.IsDNS1123Label(cfg.SecretNamespace); len(msgs) > 0 {
		bad("SecretNamespace", "%q is not a namespace name: %s", cfg.SecretNamespace, strings.Join(msgs, "; "))
	}
	if cfg.SecretName == "" {
		bad("SecretName", "required when CertDir is empty")
	} else if msgs := validation.IsDNS1123Subdomain(cfg.SecretName); len(msgs) > 0 {
		bad("SecretName", "%q is not a Secret name: %s", cfg.SecretName, strings.Join(msgs, "; "))
	}
	if cfg.WebhookConfiguration != "" {
		if msgs := validation.IsDNS1123Subdomain(cfg.WebhookConfiguration); len(msgs) > 0 {
			bad("WebhookConfiguration", "%q is not an object name: %s", cfg.WebhookConfiguration, strings.Join(msgs, "; "))
		}
	}
	if len(cfg.DNSNames) == 0 {
		bad("DNSNames", "at least one name is required when CertDir is empty")
	}
	for _, n := range cfg.DNSNames {
		if net.ParseIP(n) != nil {
			continue
		}
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			bad("DNSNames", "%q is neither an IP address nor a DNS name: %s", n, strings.Join(msgs, "; "))
		}
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"Validity", cfg.Validity}, {"CAValidity", cfg.CAValidity}, {"RenewBefore", cfg.RenewBefore}} {
		if d.v < 0 {
			bad(d.field, "%v is negative", d.v)
		}
	}
	if cfg.RenewBefore >= cfg.Validity {
		bad("RenewBefore", "%v is not shorter than Validity %v: every certificate would be renewed at once", cfg.RenewBefore, cfg.Validity)
	}
	if cfg.Validity > cfg.CAValidity {
		bad("Validity", "%v is longer than CAValidity %v: a serving certificate never outlives its CA", cfg.Validity, cfg.CAValidity)
	}
	return errors.Join(errs...)
}

// sans splits the configured names into DNS and IP subject alternative
// names, each sorted, for issuing and for comparing with a certificate.
func (cfg Config) sans() (dns []string, ips []net.IP) {
	for _, n := range cfg.DNSNames {
		if ip := net.ParseIP(n); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, n)
		}
	}
	return dns, ips
}
