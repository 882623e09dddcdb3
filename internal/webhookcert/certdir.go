package webhookcert

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"k8s.io/klog/v2"
)

// fileStamp identifies one version of a file without reading it. os.Stat
// follows symbolic links, so a Secret volume's atomic swap of its ..data link
// (how the kubelet updates cert-manager's Secret) shows as a new target's
// time and size.
type fileStamp struct {
	modTime time.Time
	size    int64
	exists  bool
}

type dirStamp struct{ cert, key, ca fileStamp }

func stampFile(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileStamp{}, nil
	}
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{modTime: fi.ModTime(), size: fi.Size(), exists: true}, nil
}

func (m *Manager) stampDir() (dirStamp, error) {
	var st dirStamp
	var err error
	for _, f := range []struct {
		name string
		into *fileStamp
	}{{KeyCert, &st.cert}, {KeyKey, &st.key}, {KeyCACert, &st.ca}} {
		if *f.into, err = stampFile(filepath.Join(m.cfg.CertDir, f.name)); err != nil {
			return st, err
		}
	}
	return st, nil
}

// loadDir loads tls.crt, tls.key and, if present, ca.crt from CertDir when
// they changed since the last load. A pair that does not parse or match
// (one file written, the other not yet) is not served: the last good pair
// stays, and the error says what is wrong. Checking costs three stats, so
// GetCertificate calls it on every handshake; the API server keeps its
// connections to a webhook open, so handshakes are rare.
func (m *Manager) loadDir(ctx context.Context) error {
	st, err := m.stampDir()
	if err != nil {
		return fmt.Errorf("webhookcert: CertDir %s: %w", m.cfg.CertDir, err)
	}
	if cur := m.state.Load(); cur != nil && cur.stamp == st {
		return nil
	}
	m.loadMu.Lock()
	defer m.loadMu.Unlock()
	if cur := m.state.Load(); cur != nil && cur.stamp == st {
		return nil
	}
	if m.badStamp != nil && *m.badStamp == st {
		return m.badErr
	}
	s, err := m.readDir(st)
	if err != nil {
		m.badStamp, m.badErr = &st, err
		return err
	}
	m.badStamp, m.badErr = nil, nil
	m.state.Store(s)
	klog.FromContext(ctx).Info("Loaded the webhook serving certificate", "dir", m.cfg.CertDir, "notAfter", s.cert.Leaf.NotAfter)
	return nil
}

func (m *Manager) readDir(st dirStamp) (*state, error) {
	dir := m.cfg.CertDir
	certPEM, err := os.ReadFile(filepath.Join(dir, KeyCert))
	if err != nil {
		return nil, fmt.Errorf("webhookcert: CertDir %s: %w", dir, err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, KeyKey))
	if err != nil {
		return nil, fmt.Errorf("webhookcert: CertDir %s: %w", dir, err)
	}
	pair, err := parseServing(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("webhookcert: CertDir %s: %w", dir, err)
	}
	var bundle []byte
	if st.ca.exists {
		if bundle, err = os.ReadFile(filepath.Join(dir, KeyCACert)); err != nil {
			return nil, fmt.Errorf("webhookcert: CertDir %s: %w", dir, err)
		}
	}
	return &state{cert: pair, bundle: bundle, stamp: st}, nil
}
