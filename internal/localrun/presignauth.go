package localrun

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The local S3 verifies a presigned request's Signature Version 4 signature, as S3 does: it
// recomputes the signature over the request as it arrived (method, path, query, and the headers
// the URL names in X-Amz-SignedHeaders, Content-Length included) with the signing key's secret,
// and refuses a mismatch with 403 SignatureDoesNotMatch. So a URL whose key, expiry or query was
// edited, a PUT without a header the URL signs (If-None-Match), or with another size than the one
// it signs (Content-Length, pipectl upload-url --bytes) is refused here as there.
// https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html
// The local run knows every secret: the run's environment gives every client the secret "local"
// (AWS_SECRET_ACCESS_KEY, with any access key id, which names the operator), and each session of
// the local STS has the secret "local" too. A presigned request signed with a session key the
// local STS never handed out is refused with InvalidAccessKeyId, as S3 refuses a key it does not
// know; one signed with another secret (real AWS credentials, say) does not verify. A request
// signed in its Authorization header is not verified here.
// https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html#ErrorCodeList

// presignedQueryAuth are the query parameters the signer adds and the canonical request leaves out
// (X-Amz-Signature) or that it sets itself when it signs again.
var presignedQueryAuth = []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Security-Token", "X-Amz-Signature"}

// presignError returns the S3 error code and message that refuse a presigned request whose
// signature does not verify, or "" for one that does and for a request that is not presigned.
func (a *tenantAuth) presignError(req *http.Request) (code, message string) {
	q := req.URL.Query()
	if !q.Has("X-Amz-Signature") {
		return "", ""
	}
	const mismatch = "The request signature we calculated does not match the signature you provided. Check your key and signing method."
	// <key>/<date>/<region>/<service>/aws4_request
	scope := strings.Split(q.Get("X-Amz-Credential"), "/")
	signed, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if len(scope) != 5 || err != nil || q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" {
		return "AuthorizationQueryParametersError", "Error parsing the X-Amz-Credential parameter; the request must be signed with AWS4-HMAC-SHA256"
	}
	if seconds, err := strconv.Atoi(q.Get("X-Amz-Expires")); err != nil || seconds < 1 || seconds > maxPresignSeconds {
		return "AuthorizationQueryParametersError", "X-Amz-Expires must be less than a week (in seconds) that is 604800"
	}
	key := scope[0]
	if a.unknownSession(key) {
		return "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records."
	}
	if a.sessionExpired(key, time.Now()) {
		return "ExpiredToken", "The provided token has expired."
	}
	if unsigned := unsignedAmzHeaders(req, q.Get("X-Amz-SignedHeaders")); len(unsigned) > 0 {
		return "AccessDenied", "There were headers present in the request which were not signed: " + strings.Join(unsigned, ", ")
	}
	u := *req.URL
	rest := u.Query()
	for _, k := range presignedQueryAuth {
		rest.Del(k)
	}
	u.RawQuery = rest.Encode()
	again := &http.Request{Method: req.Method, URL: &u, Host: req.Host, Header: http.Header{}}
	for _, h := range strings.Split(q.Get("X-Amz-SignedHeaders"), ";") {
		switch {
		case h == "host":
		case h == "content-length":
			again.ContentLength = req.ContentLength
		default:
			if v, ok := req.Header[http.CanonicalHeaderKey(h)]; ok {
				again.Header[http.CanonicalHeaderKey(h)] = v
			}
		}
	}
	creds := aws.Credentials{AccessKeyID: key, SecretAccessKey: localSecret, SessionToken: q.Get("X-Amz-Security-Token")}
	// S3 signs the path as sent, unescaped again, and a presigned body is UNSIGNED-PAYLOAD.
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	out, _, err := signer.PresignHTTP(context.Background(), creds, again, "UNSIGNED-PAYLOAD", scope[3], scope[2], signed)
	if err != nil {
		return "SignatureDoesNotMatch", mismatch
	}
	want, err := url.Parse(out)
	if err != nil || want.Query().Get("X-Amz-Signature") != q.Get("X-Amz-Signature") {
		return "SignatureDoesNotMatch", mismatch
	}
	return "", ""
}

// maxPresignSeconds is the longest X-Amz-Expires S3 takes: a week, past which it answers 400
// AuthorizationQueryParametersError. https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html
const maxPresignSeconds = 7 * 24 * 3600

// presignErrorStatus is the HTTP status S3 answers a presigned request's error code with: 400 for
// the query's parameters and for an expired session token, 403 for the rest
// (https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html#ErrorCodeList: ExpiredToken
// and AuthorizationQueryParametersError are 400 Bad Request).
func presignErrorStatus(code string) int {
	switch code {
	case "ExpiredToken", "AuthorizationQueryParametersError":
		return http.StatusBadRequest
	}
	return http.StatusForbidden
}

// sessionExpired reports whether key names an AssumeRole session of the local STS that has ended:
// a URL it signed stops working then, whatever its X-Amz-Expires says ("If you created a presigned
// URL using a temporary credential, the URL expires when the credential expires",
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-presigned-url.html).
func (a *tenantAuth) sessionExpired(key string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[key]
	return ok && !s.expires.IsZero() && !now.Before(s.expires)
}

// localSecret is the secret access key of every key the local run hands out: its clients' (the
// run's environment, AWS_SECRET_ACCESS_KEY; emulate.LocalAWS) and the local STS's sessions'.
const localSecret = "local"

// unknownSession reports whether the access key id has the shape of the local STS's session keys
// but names no session it handed out.
func (a *tenantAuth) unknownSession(key string) bool {
	if !strings.HasPrefix(key, sessionKeyPrefix) {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.sessions[key]
	return !ok
}

// unsignedAmzHeaders are the request's x-amz-* headers that a presigned request's signature does
// not cover, by their lower-case names. S3 requires every x-amz-* header a request sends to be
// signed ("X-Amz-SignedHeaders … Any x-amz-* headers that you plan to add to the request",
// https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html), and refuses one
// that is not with 403 AccessDenied, "There were headers present in the request which were not
// signed", naming them (HeadersNotSigned). So the holder of a URL can add neither a storage
// class, an encryption nor metadata of its own. x-amz-content-sha256 is left out: it names how the
// payload is signed (a presigned body is UNSIGNED-PAYLOAD) and grants nothing.
func unsignedAmzHeaders(req *http.Request, signedHeaders string) []string {
	signed := strings.Split(strings.ToLower(signedHeaders), ";")
	var out []string
	for k := range req.Header {
		name := strings.ToLower(k)
		if strings.HasPrefix(name, "x-amz-") && name != "x-amz-content-sha256" && !slices.Contains(signed, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
