package azure

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// blobServer answers a HEAD of any blob with 3 bytes when the request carries the bearer
// token want, and 403 otherwise.
func blobServer(t *testing.T, want string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+want || r.Header.Get("x-ms-version") == "" {
			w.Header().Set("x-ms-error-code", "AuthenticationFailed")
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Length", "3")
		w.Header().Set("ETag", `"0x1"`)
	}))
	t.Cleanup(s.Close)
	return s
}

// noSources leaves a test no source of tokens but the ones it sets: no service principal, a
// metadata service that refuses at once, no az command.
func noSources(t *testing.T) {
	for _, v := range []string{"AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_AUTHORITY_HOST"} {
		t.Setenv(v, "")
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	t.Setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", closed.URL)
	t.Setenv("PATH", t.TempDir())
}

func entraClient(base string) *client {
	return &client{account: "acct", container: "ctr", base: base + "/acct", hc: http.DefaultClient,
		entra: &entra{hc: &http.Client{Timeout: 5 * time.Second}, imds: &http.Client{Timeout: 5 * time.Second}}}
}

// TestEntraSources: a token from the managed identity's metadata service, from a service
// principal's secret, or from the Azure CLI is sent as a bearer token and kept until near
// its expiry; with no source, requests go anonymous and a refusal says why there was none.
func TestEntraSources(t *testing.T) {
	ctx := context.Background()
	t.Run("managed identity", func(t *testing.T) {
		noSources(t)
		var calls atomic.Int32
		imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			if r.Header.Get("Metadata") != "true" || r.URL.Query().Get("resource") != storageResource {
				http.Error(w, "bad request", http.StatusBadRequest)
				return
			}
			fmt.Fprintf(w, `{"access_token":"MI","expires_on":"%d"}`, time.Now().Add(time.Hour).Unix())
		}))
		defer imds.Close()
		t.Setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", imds.URL)
		c := entraClient(blobServer(t, "MI").URL)
		for range 3 {
			o, err := c.Stat(ctx, "p/x")
			require.NoError(t, err)
			assert.Equal(t, int64(3), o.Size)
		}
		assert.Equal(t, int32(1), calls.Load(), "the token is kept")
	})
	t.Run("service principal", func(t *testing.T) {
		noSources(t)
		idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			require.NoError(t, r.ParseForm())
			if r.URL.Path != "/tenant/oauth2/v2.0/token" || r.Form.Get("client_secret") != "s3cret" || r.Form.Get("scope") != storageResource+".default" {
				http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
				return
			}
			fmt.Fprint(w, `{"access_token":"SP","expires_in":3600}`)
		}))
		defer idp.Close()
		t.Setenv("AZURE_AUTHORITY_HOST", idp.URL)
		t.Setenv("AZURE_TENANT_ID", "tenant")
		t.Setenv("AZURE_CLIENT_ID", "app")
		t.Setenv("AZURE_CLIENT_SECRET", "s3cret")
		_, err := entraClient(blobServer(t, "SP").URL).Stat(ctx, "p/x")
		require.NoError(t, err)
	})
	t.Run("azure cli", func(t *testing.T) {
		noSources(t)
		bin := t.TempDir()
		script := "#!/bin/sh\necho '{\"accessToken\": \"CLI\", \"expires_on\": " + strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10) + "}'\n"
		require.NoError(t, os.WriteFile(filepath.Join(bin, "az"), []byte(script), 0o755))
		t.Setenv("PATH", bin)
		_, err := entraClient(blobServer(t, "CLI").URL).Stat(ctx, "p/x")
		require.NoError(t, err)
	})
	t.Run("a source that fails", func(t *testing.T) {
		noSources(t)
		idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":"temporarily_unavailable"}`, http.StatusServiceUnavailable)
		}))
		defer idp.Close()
		t.Setenv("AZURE_AUTHORITY_HOST", idp.URL)
		t.Setenv("AZURE_TENANT_ID", "tenant")
		t.Setenv("AZURE_CLIENT_ID", "app")
		t.Setenv("AZURE_CLIENT_SECRET", "s3cret")
		c := entraClient(blobServer(t, "SP").URL)
		_, err := c.Stat(ctx, "p/x")
		require.ErrorContains(t, err, "no Microsoft Entra ID token")
		assert.NotContains(t, err.Error(), "s3cret")
		assert.Equal(t, 0, c.Answer(err).Status, "no answer from the store: retried")
	})
	t.Run("none", func(t *testing.T) {
		noSources(t)
		c := entraClient(blobServer(t, "X").URL)
		start := time.Now()
		_, err := c.Stat(ctx, "p/x")
		require.Error(t, err)
		assert.Less(t, time.Since(start), 3*time.Second)
		a := c.Answer(err)
		assert.Contains(t, a.Hint, "AZURE_STORAGE_KEY")
		assert.Contains(t, a.Hint, "no credentials found")
	})
}

// TestCLIExpiry: the Azure CLI's expiry, in Unix seconds (2.54 and later) or in local time
// (older), or neither (kept 6 minutes).
func TestCLIExpiry(t *testing.T) {
	at := time.Now().Add(7 * time.Minute).Truncate(time.Second)
	_, exp, err := cliToken([]byte(`{"accessToken":"a","expires_on":` + strconv.FormatInt(at.Unix(), 10) + `}`))
	require.NoError(t, err)
	assert.True(t, exp.Equal(at))
	_, exp, err = cliToken([]byte(`{"accessToken":"a","expiresOn":"` + at.Local().Format("2006-01-02 15:04:05.000000") + `"}`))
	require.NoError(t, err)
	assert.True(t, exp.Equal(at), "%v, want %v", exp, at)
	_, exp, err = cliToken([]byte(`{"accessToken":"a"}`))
	require.NoError(t, err)
	assert.Less(t, time.Until(exp), 7*time.Minute)
	_, _, err = cliToken([]byte(`{}`))
	require.Error(t, err)
}

// TestEntraOneFetch: requests at once share one fetch; a request whose context ends while it
// waits for the fetch returns then, not when the fetch does.
func TestEntraOneFetch(t *testing.T) {
	noSources(t)
	var calls atomic.Int32
	release := make(chan struct{})
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		<-release
		fmt.Fprintf(w, `{"access_token":"MI","expires_in":"3600"}`)
	}))
	defer imds.Close()
	t.Setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", imds.URL)
	e := entraClient("http://127.0.0.1:1").entra
	e.imds = &http.Client{Timeout: 10 * time.Second}
	got := make(chan string, 8)
	for range 8 {
		go func() {
			tok, _ := e.token(context.Background())
			got <- tok
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	time.Sleep(50 * time.Millisecond) // the fetch is under way
	start := time.Now()
	_, err := e.token(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), time.Second)
	close(release)
	for range 8 {
		assert.Equal(t, "MI", <-got)
	}
	assert.Equal(t, int32(1), calls.Load())
}
