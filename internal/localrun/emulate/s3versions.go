package emulate

import (
	"encoding/base32"
	"encoding/xml"
	"net/http"
	"strings"

	"github.com/johannesboyne/gofakes3"
)

// serveVersion answers a GetObject or HeadObject that names an object version as S3 does, where
// gofakes3 does not: gofakes3 answers a HEAD for the current version whatever the id, and a GET
// with an id it cannot read with 404. S3 answers an id it cannot read with 400 InvalidArgument
// ("Invalid version id specified"), and a readable one that names no version of the key with 404
// NoSuchVersion; a HEAD response carries the status only.
// https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html#ErrorCodeList
// It reports false, having written nothing, for a request it leaves to gofakes3.
func serveVersion(inner http.Handler, w http.ResponseWriter, r *http.Request) bool {
	v := r.URL.Query().Get("versionId")
	if v == "" || v == "null" { // "null" names an object written before versioning; gofakes3 serves the current one
		return false
	}
	if !localVersionID(v) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusBadRequest)
		if r.Method != http.MethodHead {
			b, _ := xml.Marshal(gofakes3.ErrorInvalidArgument("versionId", v, "Invalid version id specified"))
			w.Write(append([]byte(xml.Header), b...))
		}
		return true
	}
	if r.Method != http.MethodHead {
		return false // gofakes3's GET reads the version, or answers NoSuchVersion
	}
	// As a GET without its body, so the headers are the version's and an unknown one is a 404.
	get := r.Clone(r.Context())
	get.Method = http.MethodGet
	inner.ServeHTTP(bodiless{w}, get)
	return true
}

// localVersionID reports whether v has the shape of the version ids this S3 hands out (s3mem's "3/"
// followed by base32hex), the only ids it can know.
func localVersionID(v string) bool {
	rest, ok := strings.CutPrefix(v, "3/")
	if !ok || rest == "" {
		return false
	}
	_, err := base32.HexEncoding.DecodeString(rest)
	return err == nil
}

// bodiless drops a response body, for a HEAD answered as a GET.
type bodiless struct{ http.ResponseWriter }

func (b bodiless) Write(p []byte) (int, error) { return len(p), nil }
