// Package stores opens a dataset's store by its URL's scheme: the one place that knows every
// backend of objstore (s3:// through source/s3, gs:// through source/gcs, az:// through
// source/azure, https:// and http:// through source/web). A new backend is a package with an Open of
// this signature and a line in backends.
package stores

import (
	"fmt"
	"strings"

	"github.com/blockfs/blockfs/source/azure"
	"github.com/blockfs/blockfs/source/gcs"
	"github.com/blockfs/blockfs/source/objstore"
	"github.com/blockfs/blockfs/source/s3"
	"github.com/blockfs/blockfs/source/web"
)

// backend is one backend: the scheme of its URLs and how to open one.
type backend struct {
	scheme string
	open   func(url string, opt objstore.Options) (*objstore.Store, error)
}

var backends = []backend{
	{s3.Scheme, s3.Open},
	{gcs.Scheme, gcs.Open},
	{azure.Scheme, azure.Open},
	{web.HTTPS, web.Open},
	{web.HTTP, web.Open},
}

// IsURL reports whether s names a dataset in a store (s3://...) rather than a local path.
func IsURL(s string) bool {
	for _, b := range backends {
		if strings.HasPrefix(s, b.scheme) {
			return true
		}
	}
	return false
}

// Open returns the store of the dataset at url. It does no I/O.
func Open(url string, opt objstore.Options) (*objstore.Store, error) {
	for _, b := range backends {
		if strings.HasPrefix(url, b.scheme) {
			return b.open(url, opt)
		}
	}
	return nil, fmt.Errorf("%s: not a store's URL (%s)", url, Schemes())
}

// Schemes lists the URL forms of the stores, for messages.
func Schemes() string {
	var out []string
	for _, b := range backends {
		out = append(out, b.scheme+"...")
	}
	return strings.Join(out, ", ")
}
