package azure

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/source/objstore"
)

func TestOpenURL(t *testing.T) {
	t.Setenv("AZURE_STORAGE_KEY", "")
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "")
	t.Setenv("AZURE_STORAGE_SAS_TOKEN", "")
	st, err := Open("az://acct/ctr/a/b/", objstore.Options{})
	require.NoError(t, err)
	assert.Equal(t, "az://acct/ctr/a/b", st.Location())
	assert.Equal(t, "az://acct/ctr/a/b/blockfs.json", st.Path("blockfs.json"))
	for _, bad := range []string{"az://", "az://acct", "az://acct/", "az://acct/ctr/a//b", "az://acct/ctr/a/../b", "az://a%2f/c/p"} {
		_, err := Open(bad, objstore.Options{})
		assert.Error(t, err, bad)
	}
	t.Setenv("AZURE_STORAGE_KEY", "not base64!")
	_, err = Open("az://acct/ctr/p", objstore.Options{})
	assert.ErrorContains(t, err, "AZURE_STORAGE_KEY")
	t.Setenv("AZURE_STORAGE_KEY", "")
	t.Setenv("AZURE_STORAGE_SAS_TOKEN", "sv=2021-08-06&sp=r")
	_, err = Open("az://acct/ctr/p", objstore.Options{})
	assert.ErrorContains(t, err, "sig=")
}

// TestAnswer: the Blob service's error codes as the kinds objstore retries (or not) and
// reports; a listing's ETag compares equal to the header's.
func TestAnswer(t *testing.T) {
	c := &client{account: "acct", container: "ctr", base: "http://127.0.0.1:1/acct"}
	reply := func(status int, code string) error {
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:1/acct/ctr/x?sig=secret", nil)
		h := http.Header{}
		h.Set("x-ms-error-code", code)
		return serviceError(&http.Response{StatusCode: status, Status: http.StatusText(status), Header: h, Request: req,
			Body: io.NopCloser(strings.NewReader("<?xml version=\"1.0\"?><Error><Code>" + code + "</Code><Message>msg</Message></Error>"))})
	}
	for _, tc := range []struct {
		status int
		code   string
		want   objstore.Kind
	}{
		{404, "BlobNotFound", objstore.NotFound},
		{404, "ContainerNotFound", objstore.NoBucket},
		{412, "ConditionNotMet", objstore.Changed},
		{416, "InvalidRange", objstore.Short},
		{403, "AuthenticationFailed", objstore.Denied},
		{503, "ServerBusy", objstore.Throttled},
		{500, "InternalError", objstore.Transient},
	} {
		err := reply(tc.status, tc.code)
		assert.Equal(t, tc.want, c.Answer(err).Kind, err.Error())
		assert.NotContains(t, err.Error(), "secret")
	}
	assert.Contains(t, c.Answer(reply(403, "AuthenticationFailed")).Hint, "AZURE_STORAGE_KEY")
	assert.Equal(t, `"0x8D"`, quoted("0x8D"))
	assert.Equal(t, `"0x8D"`, quoted(`"0x8D"`))
}

// TestSASNotInMessages: a request that fails before any answer names its URL without the
// SAS token's signature; a refusal of an anonymous request is Denied, not a missing
// container; a query name's case does not change the signature.
func TestSASNotInMessages(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	c := &client{account: "acct", container: "ctr", base: closed.URL + "/acct", hc: http.DefaultClient,
		sas: map[string][]string{"sig": {"TOPSECRET"}, "sp": {"r"}}}
	_, err := c.Stat(t.Context(), "p/x")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "TOPSECRET")

	anon := &client{account: "acct", container: "ctr", base: "http://127.0.0.1:1/acct"}
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:1/acct/ctr/x", nil)
	h := http.Header{}
	h.Set("x-ms-error-code", "ResourceNotFound")
	err = serviceError(&http.Response{StatusCode: 404, Status: "404 Not Found", Header: h, Request: req, Body: io.NopCloser(strings.NewReader(""))})
	assert.Equal(t, objstore.Denied, anon.Answer(err).Kind)

	k := &client{account: "acct", key: []byte("key")}
	lower := httptest.NewRequest(http.MethodGet, "http://h/acct/ctr?comp=list&restype=container", nil)
	upper := httptest.NewRequest(http.MethodGet, "http://h/acct/ctr?Comp=list&restype=container", nil)
	assert.Equal(t, k.sign(lower), k.sign(upper))
}
