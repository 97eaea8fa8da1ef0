// Package certs makes and loads the certificates nodes authenticate each
// other with (docs/cluster.md, Security): a development CA and node
// certificates written by `execute-code node certs`, and the mutual-TLS
// configurations built from a CA, a certificate and a key named in the
// configuration.
//
// It is the runtime's own machinery: its exported names serve sibling
// packages and carry no compatibility promise.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"
)

// Validity is how long a development certificate is valid.
const Validity = 365 * 24 * time.Hour

// DefaultNames are the certificates `node certs` writes when given none:
// one session side and three kernel nodes, the README's three-node run.
var DefaultNames = []string{"session", "node1", "node2", "node3"}

// Errors callers branch on.
var (
	ErrExists      = errors.New("file already exists")
	ErrBadName     = errors.New("invalid certificate name")
	ErrInvalidFile = errors.New("invalid certificate file")
)

// nameRe is compiled at its first use, not at start-up: the bounded
// repetition unrolls into a program whose compilation was the largest
// package initialiser of every execute-code start (about 1 ms), and only
// `node certs` needs it.
var nameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`) })

// WriteDev writes a development CA (ca.pem, ca-key.pem) and, for each
// name, NAME.pem and NAME-key.pem into dir, creating it 0700 if missing.
// Every certificate serves both ends of a connection (nodes dial each
// other) and names 127.0.0.1, ::1, localhost and its own name. Keys are
// 0600; nothing that exists is overwritten. It returns the files written.
func WriteDev(dir string, names []string, now time.Time) ([]string, error) {
	if len(names) == 0 {
		names = DefaultNames
	}
	seen := map[string]bool{"ca": true}
	for _, n := range names {
		if !nameRe().MatchString(n) || seen[n] {
			return nil, fmt.Errorf("%w: %q (lower-case letters, digits and '-', unique, not \"ca\")", ErrBadName, n)
		}
		seen[n] = true
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("certificate directory: %w", err)
	}
	// Check every file first, so a refusal writes nothing.
	files := []string{"ca.pem", "ca-key.pem"}
	for _, n := range names {
		files = append(files, n+".pem", n+"-key.pem")
	}
	for _, f := range files {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, f), ErrExists)
		}
	}

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "execute-code development CA"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	var written []string
	write := func(name string, der []byte, key *ecdsa.PrivateKey) error {
		certPath := filepath.Join(dir, name+".pem")
		if err := writeNew(certPath, "CERTIFICATE", der, 0o644); err != nil {
			return err
		}
		written = append(written, certPath)
		kb, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return fmt.Errorf("%s key: %w", name, err)
		}
		keyPath := filepath.Join(dir, name+"-key.pem")
		if err := writeNew(keyPath, "PRIVATE KEY", kb, 0o600); err != nil {
			return err
		}
		written = append(written, keyPath)
		return nil
	}
	if err := write("ca", caDER, caKey); err != nil {
		return written, err
	}
	for _, n := range names {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return written, fmt.Errorf("%s key: %w", n, err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: n},
			NotBefore:    now.Add(-time.Minute),
			NotAfter:     now.Add(Validity),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			DNSNames:     []string{"localhost", n},
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return written, fmt.Errorf("%s certificate: %w", n, err)
		}
		if err := write(n, der, key); err != nil {
			return written, err
		}
	}
	return written, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("certificate serial: %v", err)) // the kernel's RNG failing is not recoverable
	}
	return n
}

// writeNew creates path exclusively, never through a link, and writes one
// PEM block.
func writeNew(path, kind string, der []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s: %w", path, ErrExists)
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := pem.Encode(f, &pem.Block{Type: kind, Bytes: der}); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// TLS is one node's mutual-TLS configuration: what it serves with and
// what it dials with, both trusting only the CA.
type TLS struct {
	Server *tls.Config
	Client *tls.Config
}

// Load builds a node's TLS from the CA certificate, its own certificate
// and its key. Every error names the file and what is wrong with it.
func Load(caFile, certFile, keyFile string, now time.Time) (*TLS, error) {
	ca, err := readCert(caFile)
	if err != nil {
		return nil, err
	}
	if !ca.IsCA {
		return nil, fmt.Errorf("%s: %w: not a CA certificate", caFile, ErrInvalidFile)
	}
	leaf, err := readCert(certFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", certFile, ErrInvalidFile, verifyProblem(err, caFile))
	}
	certPEM, _ := os.ReadFile(certFile)
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: not the key of %s", keyFile, ErrInvalidFile, certFile)
	}
	return &TLS{
		Server: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{pair},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    pool,
		},
		Client: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{pair},
			RootCAs:      pool,
		},
	}, nil
}

func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: %w: no PEM certificate in it", path, ErrInvalidFile)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrInvalidFile, err)
	}
	return c, nil
}

func verifyProblem(err error, caFile string) string {
	var inv x509.CertificateInvalidError
	var unk x509.UnknownAuthorityError
	switch {
	case errors.As(err, &inv) && inv.Reason == x509.Expired:
		return "expired or not yet valid"
	case errors.As(err, &unk):
		return "not signed by the CA in " + caFile
	}
	return err.Error()
}
