package certs

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func load(t *testing.T, dir, name string) *TLS {
	t.Helper()
	c, err := Load(filepath.Join(dir, "ca.pem"), filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem"), time.Now())
	require.NoError(t, err)
	return c
}

// handshake runs a real TLS handshake over loopback: the server with
// server's config, the client dialing with client (nil: no TLS client
// certificate at all) and says what each end saw.
func handshake(t *testing.T, server, client *tls.Config) (serverErr, clientErr error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", server)
	require.NoError(t, err)
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		done <- c.(*tls.Conn).Handshake()
	}()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), client)
	if err == nil {
		// TLS 1.3 reports a refused client certificate on the first read.
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	return <-done, err
}

func TestNodesWithCertificatesOfOneCATrustEachOtherAndNoOneElse(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	files, err := WriteDev(dir, nil, time.Now())
	require.NoError(t, err)
	assert.Len(t, files, 2+2*len(DefaultNames))
	_, err = WriteDev(other, []string{"node1"}, time.Now())
	require.NoError(t, err)
	for _, f := range files {
		fi, err := os.Stat(f)
		require.NoError(t, err)
		if filepath.Ext(f) == ".pem" && len(f) > 8 && f[len(f)-8:] == "-key.pem" {
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
		}
	}

	session, node := load(t, dir, "session"), load(t, dir, "node1")
	srvErr, cliErr := handshake(t, node.Server, session.Client)
	require.NoError(t, srvErr)
	// The server closes after its handshake: the client reads a clean
	// end, not a TLS alert.
	require.ErrorIs(t, cliErr, io.EOF)

	// No client certificate: refused in the handshake.
	noCert := session.Client.Clone()
	noCert.Certificates = nil
	srvErr, _ = handshake(t, node.Server, noCert)
	require.Error(t, srvErr)
	assert.Contains(t, srvErr.Error(), "certificate")

	// A certificate of another CA: refused by the server; and a server of
	// another CA is refused by the client.
	stranger := load(t, other, "node1")
	srvErr, _ = handshake(t, node.Server, stranger.Client)
	require.Error(t, srvErr)
	_, cliErr = handshake(t, stranger.Server, session.Client)
	require.Error(t, cliErr)
	assert.Contains(t, cliErr.Error(), "certificate")
}

func TestWriteDevNeverOverwritesAndRefusesBadNames(t *testing.T) {
	dir := t.TempDir()
	_, err := WriteDev(dir, []string{"node1"}, time.Now())
	require.NoError(t, err)
	before, err := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	require.NoError(t, err)
	_, err = WriteDev(dir, []string{"node2"}, time.Now())
	require.ErrorIs(t, err, ErrExists)
	after, _ := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	assert.Equal(t, before, after)
	_, err = os.Stat(filepath.Join(dir, "node2.pem"))
	assert.ErrorIs(t, err, os.ErrNotExist, "a refusal writes nothing")

	// A planted symlink where a key would go is not followed.
	d2 := t.TempDir()
	target := filepath.Join(t.TempDir(), "stolen")
	require.NoError(t, os.Symlink(target, filepath.Join(d2, "node1-key.pem")))
	_, err = WriteDev(d2, []string{"node1"}, time.Now())
	require.ErrorIs(t, err, ErrExists)
	_, err = os.Stat(target)
	assert.ErrorIs(t, err, os.ErrNotExist)

	for _, bad := range []string{"../x", "a/b", "", "CA", "ca", "x y", string(make([]byte, 70))} {
		_, err := WriteDev(t.TempDir(), []string{bad}, time.Now())
		require.ErrorIs(t, err, ErrBadName, "%q", bad)
	}
	_, err = WriteDev(t.TempDir(), []string{"a", "a"}, time.Now())
	require.ErrorIs(t, err, ErrBadName)
}

func TestLoadNamesTheFileAndWhatIsWrong(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	_, err := WriteDev(dir, []string{"node1", "node2"}, time.Now())
	require.NoError(t, err)
	_, err = WriteDev(other, []string{"node1"}, time.Now())
	require.NoError(t, err)
	garbage := filepath.Join(dir, "garbage.pem")
	require.NoError(t, os.WriteFile(garbage, []byte("not a certificate"), 0o600))
	p := func(d, f string) string { return filepath.Join(d, f) }
	cases := []struct {
		name             string
		ca, cert, key    string
		at               time.Time
		mention          string
		invalid, missing bool
	}{
		{"missing CA", p(dir, "nope.pem"), p(dir, "node1.pem"), p(dir, "node1-key.pem"), time.Now(), "nope.pem", false, true},
		{"garbage certificate", p(dir, "ca.pem"), garbage, p(dir, "node1-key.pem"), time.Now(), "garbage.pem: invalid certificate file: no PEM", true, false},
		{"a leaf as the CA", p(dir, "node1.pem"), p(dir, "node1.pem"), p(dir, "node1-key.pem"), time.Now(), "not a CA", true, false},
		{"another node's key", p(dir, "ca.pem"), p(dir, "node1.pem"), p(dir, "node2-key.pem"), time.Now(), "not the key of", true, false},
		{"another CA", p(dir, "ca.pem"), p(other, "node1.pem"), p(other, "node1-key.pem"), time.Now(), "not signed by the CA", true, false},
		{"expired", p(dir, "ca.pem"), p(dir, "node1.pem"), p(dir, "node1-key.pem"), time.Now().Add(2 * Validity), "expired", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(c.ca, c.cert, c.key, c.at)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.mention)
			if c.invalid {
				assert.ErrorIs(t, err, ErrInvalidFile)
			}
			if c.missing {
				assert.ErrorIs(t, err, os.ErrNotExist)
			}
		})
	}
}
