package azure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Microsoft Entra ID tokens for Azure Storage, found as the Azure CLI and SDKs find them when
// the environment names no key or SAS token: a service principal's secret
// (AZURE_TENANT_ID, AZURE_CLIENT_ID, AZURE_CLIENT_SECRET), the managed identity of an Azure VM
// or AKS pod (the instance metadata service; AZURE_CLIENT_ID picks a user-assigned one), then
// the Azure CLI's login (az account get-access-token). Each token is kept until a few minutes
// before it expires.

// storageResource is the resource the tokens are for.
const storageResource = "https://storage.azure.com/"

// entra gets and keeps a token. Safe for concurrent use.
type entra struct {
	hc   *http.Client // bounded: a token service that never answers must not hold requests
	imds *http.Client // the metadata service's: no proxy (it is not reached through one)

	mu       sync.Mutex
	tok      string
	exp      time.Time
	from     string        // which source gave it, for messages
	err      error         // why none did, at the last try
	tried    time.Time     // when the sources were last tried and gave none
	fetching chan struct{} // closed when the fetch under way ends; nil: none
}

// retryNone is how long a machine where no source gave a token goes anonymous before the
// sources are tried again (each try may wait 2 s for a metadata service that is not there).
const retryNone = time.Minute

// token returns a token, fetching one when none is kept or it expires within 5 minutes; ""
// when no source is here (requests then go anonymous). A source that is here and fails is an
// error, which the request's retries try again (a token still valid is used meanwhile). One
// fetch at a time, under its own time limits and not the context of the request that started
// it; the others wait for it only as long as their own context lets them, and use a token
// still valid rather than wait.
func (e *entra) token(ctx context.Context) (string, error) {
	for {
		e.mu.Lock()
		switch {
		case e.tok != "" && time.Until(e.exp) > 5*time.Minute:
			defer e.mu.Unlock()
			return e.tok, nil
		case e.tok == "" && !e.tried.IsZero() && time.Since(e.tried) < retryNone:
			e.mu.Unlock()
			return "", nil
		case e.fetching != nil && e.tok != "" && time.Until(e.exp) > 0:
			defer e.mu.Unlock()
			return e.tok, nil
		case e.fetching != nil:
			wait := e.fetching
			e.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		done := make(chan struct{})
		e.fetching = done
		e.mu.Unlock()
		tok, exp, from, err := e.fetchAny(context.WithoutCancel(ctx))
		e.mu.Lock()
		e.fetching = nil
		close(done)
		defer e.mu.Unlock()
		e.err = err
		switch {
		case tok != "":
			e.tok, e.exp, e.from = tok, exp, from
			return tok, nil
		case err == nil: // no source here: anonymous, and the sources asked again in a while
			e.tok, e.tried = "", time.Now()
			return "", nil
		case e.tok != "" && time.Until(e.exp) > 0:
			return e.tok, nil // the refresh failed: the token kept is still good
		}
		e.tok = ""
		return "", fmt.Errorf("no Microsoft Entra ID token: %w", err)
	}
}

// fetchAny asks the sources in turn and returns the first token, with its expiry and which
// source gave it; no token and no error when no source is here.
func (e *entra) fetchAny(ctx context.Context) (string, time.Time, string, error) {
	var errs []error
	for _, src := range []struct {
		name string
		get  func(context.Context) (string, time.Time, error)
	}{
		{"the service principal of AZURE_CLIENT_ID", e.servicePrincipal},
		{"the managed identity", e.managedIdentity},
		{"the Azure CLI", e.azureCLI},
	} {
		tok, exp, err := src.get(ctx)
		if err == nil {
			return tok, exp, src.name, nil
		}
		if !errors.Is(err, errNotHere) {
			errs = append(errs, fmt.Errorf("%s: %w", src.name, err))
		}
	}
	return "", time.Time{}, "", errors.Join(errs...)
}

// errNotHere: a source that this machine does not have (no variables, no metadata service,
// no az command).
var errNotHere = errors.New("not here")

// servicePrincipal is the client credentials flow with AZURE_CLIENT_SECRET.
func (e *entra) servicePrincipal(ctx context.Context) (string, time.Time, error) {
	tenant, id, secret := os.Getenv("AZURE_TENANT_ID"), os.Getenv("AZURE_CLIENT_ID"), os.Getenv("AZURE_CLIENT_SECRET")
	if tenant == "" || id == "" || secret == "" {
		return "", time.Time{}, errNotHere
	}
	authority := strings.TrimSuffix(os.Getenv("AZURE_AUTHORITY_HOST"), "/")
	if authority == "" {
		authority = "https://login.microsoftonline.com"
	}
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {secret},
		"scope": {storageResource + ".default"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, authority+"/"+url.PathEscape(tenant)+"/oauth2/v2.0/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", time.Time{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return e.fetch(e.hc, req)
}

// managedIdentity asks the instance metadata service (AZURE_POD_IDENTITY_AUTHORITY_HOST
// overrides its address, as the SDKs let it).
func (e *entra) managedIdentity(ctx context.Context) (string, time.Time, error) {
	host := strings.TrimSuffix(os.Getenv("AZURE_POD_IDENTITY_AUTHORITY_HOST"), "/")
	if host == "" {
		host = "http://169.254.169.254"
	}
	q := url.Values{"api-version": {"2018-02-01"}, "resource": {storageResource}}
	if id := os.Getenv("AZURE_CLIENT_ID"); id != "" {
		q.Set("client_id", id)
	}
	// A machine with no metadata service answers nothing: a short wait says so.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, host+"/metadata/identity/oauth2/token?"+q.Encode(), nil)
	if err != nil {
		return "", time.Time{}, err
	}
	req.Header.Set("Metadata", "true")
	tok, exp, err := e.fetch(e.imds, req)
	var ne net.Error
	if err != nil && ((errors.As(err, &ne) && ne.Timeout()) || ctx.Err() != nil ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)) {
		return "", time.Time{}, errNotHere
	}
	return tok, exp, err
}

// tokenAnswer is a token service's answer: expires_in (seconds) or expires_on (Unix
// seconds), as numbers or strings.
type tokenAnswer struct {
	AccessToken string      `json:"access_token"`
	ExpiresIn   json.Number `json:"expires_in"`
	ExpiresOn   json.Number `json:"expires_on"`
}

// fetch sends a token request through hc and reads its answer.
func (e *entra) fetch(hc *http.Client, req *http.Request) (string, time.Time, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return "", time.Time{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", time.Time{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return "", time.Time{}, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b[:min(len(b), 300)])))
	}
	var t tokenAnswer
	if err := json.Unmarshal(b, &t); err != nil || t.AccessToken == "" {
		return "", time.Time{}, fmt.Errorf("no token in the answer")
	}
	exp := time.Now().Add(time.Hour)
	if n, err := t.ExpiresOn.Int64(); err == nil && n > 0 {
		exp = time.Unix(n, 0)
	} else if n, err := t.ExpiresIn.Int64(); err == nil && n > 0 {
		exp = time.Now().Add(time.Duration(n) * time.Second)
	}
	return t.AccessToken, exp, nil
}

// azureCLI asks the Azure CLI for a token of its login.
func (e *entra) azureCLI(ctx context.Context) (string, time.Time, error) {
	az, err := exec.LookPath("az")
	if err != nil {
		return "", time.Time{}, errNotHere
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, az, "account", "get-access-token", "--resource", storageResource, "--output", "json").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%v: %s (az login?)", err, strings.TrimSpace(string(ee.Stderr[:min(len(ee.Stderr), 300)])))
		}
		return "", time.Time{}, err
	}
	return cliToken(out)
}

// cliToken reads az account get-access-token's output: expires_on in Unix seconds (Azure CLI
// 2.54 and later), else expiresOn in local time ("2006-01-02 15:04:05.000000"); with neither,
// the token is kept 6 minutes (the CLI may hand out a cached one that expires soon).
func cliToken(out []byte) (string, time.Time, error) {
	var t struct {
		AccessToken string `json:"accessToken"`
		ExpiresOn   int64  `json:"expires_on"`
		ExpiresOnAt string `json:"expiresOn"`
	}
	if err := json.Unmarshal(out, &t); err != nil || t.AccessToken == "" {
		return "", time.Time{}, fmt.Errorf("az account get-access-token gave no token")
	}
	exp := time.Now().Add(6 * time.Minute)
	if t.ExpiresOn > 0 {
		exp = time.Unix(t.ExpiresOn, 0)
	} else if at, err := time.ParseInLocation("2006-01-02 15:04:05.999999", t.ExpiresOnAt, time.Local); err == nil {
		exp = at
	}
	return t.AccessToken, exp, nil
}

// status says where the token came from, or why there is none, for a refusal's message.
func (e *entra) status() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.tok != "":
		return "a Microsoft Entra ID token from " + e.from
	case e.err != nil:
		return "no Microsoft Entra ID token (" + e.err.Error() + ")"
	}
	return "no credentials found"
}
