package localrun

import (
	"bytes"
	"cmp"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/example/tenantpipeline/internal/localrun/deploy"
	"github.com/example/tenantpipeline/internal/localrun/emulate"
	"github.com/example/tenantpipeline/internal/pipeline"
)

// The local emulation of the sessions the pipeline's roles hand out (constructs/tenantpipeline,
// tenantrole.go and upload.go). A local STS answers AssumeRole with an access key id that names the
// session, and remembers the session's role and tags. In front of the S3, SQS and DynamoDB
// endpoints, a request signed with such a key is judged by the role's policies in the synthesized
// template, with ${aws:PrincipalTag/<key>} replaced by the session's tag, and by the bucket's or
// the queue's policy (resourcepolicy.go, sqsauth.go, leadingkeys.go), in AWS's order
// (policyeval.go, which says what of IAM's language is evaluated and how the rest fails closed);
// a refusal is AWS's AccessDenied. Each
// function runs with a session of its execution role (Run.roleCredentials), so the pipeline's own
// requests are judged as well; a request signed with the operators' and the harness's key
// ("local") passes. Register's GetSecretValue is judged the same way by the local Secrets
// Manager (secrets.go).
//
// AssumeRole is judged by the role's trust policy and the caller's own policies (sts.go): its
// principals, its conditions on the session tags (aws:RequestTag/<key>, aws:TagKeys), and
// sts:TagSession for a tagged session, as STS judges it
// (https://docs.aws.amazon.com/IAM/latest/UserGuide/id_session-tags.html, "Permissions required
// to add session tags"). A function calls with its execution role's session; the run's own key
// stands for whichever principal the trust names (an operator, a platform's uploader).
//
// The same sessions reach the operator's endpoints: the control plane's STS answers AssumeRole
// here (a pool's uploader role, pipectl upload-url --role), and the operator's S3 endpoint is
// guarded too, so an uploader's session (of a pool's role or a silo tenant's) is held to its role's
// policy and the bucket's like the functions' are. A presigned request names its key in the query
// (X-Amz-Credential) and is refused once its X-Amz-Expires has passed, as S3 refuses it
// (https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html), and refused when
// its signature does not verify (presignauth.go). The local endpoints are plain HTTP on loopback,
// standing in for AWS's HTTPS endpoints, so aws:SecureTransport is true for a loopback request: a
// TLS-only Allow stays testable, and a request from elsewhere would be false.

// tenantSession is one session of a role the local STS handed out.
type tenantSession struct {
	role string // the role's ARN as the template resolves it
	tags map[string]string
	name string // the RoleSessionName; a function's session is named after the function, as Lambda names it
	// expires is when an AssumeRole session ends (its Expiration); zero for a function's own,
	// which Lambda renews.
	expires time.Time
}

// tenantAuth holds the sessions and evaluates their roles' policies.
type tenantAuth struct {
	asm *deploy.Assembly
	res *deploy.Resolver

	mu       sync.Mutex
	sessions map[string]tenantSession // by access key id
	policies map[string][]statement   // by role ARN, resolved on first use
	// maxSession is each resolved role's MaxSessionDuration in seconds (absent: 3600, IAM's default).
	maxSession map[string]int
	// roleIDs is each resolved role's unique id (AROA…), by ARN: a session's aws:userid is
	// "<role id>:<session name>" (userID).
	roleIDs map[string]string
	// trust is each resolved role's trust policy, its statements' Resource the role (sts.go).
	trust map[string][]statement
	// resourcePolicies are the statements of each bucket's and queue's policy, by bucket name and
	// by "sqs:" and queue name (resourcepolicy.go).
	resourcePolicies map[string][]statement
	logs             io.Writer         // why a request was refused; nil: not said
	judged           map[string]int    // requests judged, by the session's role
	functionRoles    map[string]string // each function's execution role, by the function's name
	refused          int
	assumed          map[string]int // AssumeRole calls answered, by the session's tenant tag
	// storeKeys is what the templates say of each store a request named, read on first use: the
	// customer-managed key of a table or state machine (kmsauth.go, sfnauth.go) and a table's
	// partition key (leadingkeys.go), "" for none.
	storeKeys map[string]string
	// created are the roles made through the local IAM API, by ARN (iam.go).
	created map[string]*createdRole
}

// storeKey is the fact id of a store ("table/<name>", "hash/<name>"), found by find on first
// use: the templates do not change during a run, so a request never scans them again.
func (a *tenantAuth) storeKey(id string, find func() string) string {
	a.mu.Lock()
	k, ok := a.storeKeys[id]
	a.mu.Unlock()
	if ok {
		return k
	}
	k = find()
	a.mu.Lock()
	if a.storeKeys == nil {
		a.storeKeys = map[string]string{}
	}
	a.storeKeys[id] = k
	a.mu.Unlock()
	return k
}

func newTenantAuth(asm *deploy.Assembly, res *deploy.Resolver) *tenantAuth {
	return &tenantAuth{asm: asm, res: res, sessions: map[string]tenantSession{}, policies: map[string][]statement{}, maxSession: map[string]int{}, roleIDs: map[string]string{},
		trust: map[string][]statement{}}
}

// sessionKeyPrefix starts every access key id of a local tenant session.
const sessionKeyPrefix = "ASIALOCALTENANT"

// serveSTS answers AssumeRole (awsQuery protocol,
// https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html).
func (a *tenantAuth) serveSTS(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	form, _ := url.ParseQuery(string(body))
	if form.Get("Action") != "AssumeRole" {
		queryError(w, http.StatusBadRequest, "InvalidAction", fmt.Sprintf("the local STS emulates AssumeRole only, not %q", form.Get("Action")))
		return
	}
	a.assumeRole(w, req, form)
}

// assumeRole answers one AssumeRole request's form, for the functions' STS and the operator's.
func (a *tenantAuth) assumeRole(w http.ResponseWriter, req *http.Request, form url.Values) {
	role := form.Get("RoleArn")
	tags := map[string]string{}
	for i := 1; form.Has(fmt.Sprintf("Tags.member.%d.Key", i)); i++ {
		tags[form.Get(fmt.Sprintf("Tags.member.%d.Key", i))] = form.Get(fmt.Sprintf("Tags.member.%d.Value", i))
	}
	var caller *tenantSession
	if s, ok := a.session(req); ok {
		caller = &s
	}
	if ok, why := a.trusts(caller, role, tags); !ok {
		a.refuse()
		who := "the run's own key"
		if caller != nil {
			who = caller.role
		}
		a.say("STS AssumeRole %s by %s with tags %v: AccessDenied: %s", role, who, tags, why)
		queryError(w, http.StatusForbidden, "AccessDenied", fmt.Sprintf("User: %s is not authorized to perform: sts:AssumeRole on resource: %s", who, role))
		return
	}
	seconds := 3600
	fmt.Sscan(form.Get("DurationSeconds"), &seconds)
	// DurationSeconds: 900 seconds up to the role's maximum session duration, else STS's
	// ValidationError (https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html).
	a.mu.Lock()
	limit := cmp.Or(a.maxSession[role], 3600)
	a.mu.Unlock()
	if seconds < 900 || seconds > limit {
		queryError(w, http.StatusBadRequest, "ValidationError", fmt.Sprintf("The requested DurationSeconds %d is outside 900 to the MaxSessionDuration %d set for this role.", seconds, limit))
		return
	}
	expires := time.Now().Add(time.Duration(seconds) * time.Second).UTC().Truncate(time.Second)
	key := a.newSession(role, form.Get("RoleSessionName"), tags)
	a.mu.Lock()
	s := a.sessions[key]
	s.expires = expires
	a.sessions[key] = s
	a.mu.Unlock()
	// AssumedRoleId is the session's aws:userid: the role's unique id and the session's name.
	userID, ok := a.userID(tenantSession{role: role, name: form.Get("RoleSessionName")})
	if !ok {
		userID = "AROALOCAL:" + form.Get("RoleSessionName")
	}
	a.mu.Lock()
	if a.assumed == nil {
		a.assumed = map[string]int{}
	}
	a.assumed[tags[pipeline.TenantTag]]++
	a.mu.Unlock()
	type credentials struct {
		AccessKeyID     string `xml:"AccessKeyId"`
		SecretAccessKey string
		SessionToken    string
		Expiration      string
	}
	writeXML(w, http.StatusOK, struct {
		XMLName     xml.Name    `xml:"AssumeRoleResponse"`
		NS          string      `xml:"xmlns,attr"`
		Credentials credentials `xml:"AssumeRoleResult>Credentials"`
		Arn         string      `xml:"AssumeRoleResult>AssumedRoleUser>Arn"`
		RoleID      string      `xml:"AssumeRoleResult>AssumedRoleUser>AssumedRoleId"`
		Request     string      `xml:"ResponseMetadata>RequestId"`
	}{NS: "https://sts.amazonaws.com/doc/2011-06-15/",
		Credentials: credentials{AccessKeyID: key, SecretAccessKey: localSecret, SessionToken: "local-" + key,
			Expiration: expires.Format(time.RFC3339)},
		Arn: role + "/" + form.Get("RoleSessionName"), RoleID: userID, Request: uuid()})
}

// say writes one line of why a request was refused to the run's diagnostics.
func (a *tenantAuth) say(format string, args ...any) {
	if a.logs != nil {
		fmt.Fprintf(a.logs, "local IAM: "+format+"\n", args...)
	}
}

// newSession records a session of role named name with tags and returns its access key id; its
// secret is localSecret and its token "local-" and the key.
func (a *tenantAuth) newSession(role, name string, tags map[string]string) string {
	key := sessionKeyPrefix + strings.ToUpper(emulate.NewID()[:12])
	a.mu.Lock()
	a.sessions[key] = tenantSession{role: role, tags: tags, name: name}
	a.mu.Unlock()
	return key
}

// userID is the session's aws:userid, "<role's unique id>:<session name>", once its role was
// resolved (roleStatements); a role the templates do not create has none here, and a condition
// on the key then finds it absent.
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_variables.html#principaltable
func (a *tenantAuth) userID(s tenantSession) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	id, ok := a.roleIDs[s.role]
	if !ok {
		return "", false
	}
	return id + ":" + s.name, true
}

// assumedRoleARN is the ARN STS gives a session of a role: the role's name without its path, and
// the session's name.
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-arns
func (s tenantSession) assumedRoleARN() string {
	parts := strings.SplitN(s.role, ":", 6)
	if len(parts) != 6 {
		return s.role
	}
	name := parts[5][strings.LastIndex(parts[5], "/")+1:]
	return fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", parts[4], name, s.name)
}

func (a *tenantAuth) refuse() {
	a.mu.Lock()
	a.refused++
	a.mu.Unlock()
}

// SessionTenants are the tenant tags of the sessions handed out, one per session.
func (a *tenantAuth) SessionTenants() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, s := range a.sessions {
		out = append(out, s.tags[pipeline.TenantTag])
	}
	return out
}

// AssumeRoleCalls is how many AssumeRole calls were answered for sessions of the tenant: free
// (cost.USEast1.STSCall, with its source), and counted so that the cost figure shows them.
func (a *tenantAuth) AssumeRoleCalls(tenant string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.assumed[tenant]
}

// Judged is how many requests of sessions of the role were judged.
func (a *tenantAuth) Judged(role string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.judged[role]
}

// Refused is how many requests and AssumeRole calls were refused.
func (a *tenantAuth) Refused() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refused
}

// roleStatements returns the statements of the policies attached to the role whose ARN is role
// (its Fn::GetAtt Arn as the run resolves it), resolved once.
func (a *tenantAuth) roleStatements(role string) ([]statement, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if st, ok := a.policies[role]; ok {
		return st, nil
	}
	var found *deploy.Resource
	for _, r := range a.asm.OfType("AWS::IAM::Role") {
		arn, err := a.res.ResolveString(r.Stack, json.RawMessage(fmt.Sprintf(`{"Fn::GetAtt":[%q,"Arn"]}`, r.LogicalID)))
		if err == nil && arn == role {
			found = r
			break
		}
	}
	// A role made through the local IAM API: its trust policy and inline policies (iam.go).
	if c := a.created[role]; found == nil && c != nil {
		a.trust[role] = c.trust
		a.roleIDs[role] = c.ID
		var out []statement
		for _, doc := range c.policies {
			out = append(out, doc...)
		}
		a.policies[role] = out
		return out, nil
	}
	// A role the templates create is judged by its own policies, even where a resource policy
	// exempts it by ARN as it exempts an operator's.
	if found == nil && (role == a.outsiderRole() || a.externalRole(role)) {
		// Any principal of the account may assume it, by its own policies. Kept, so that the
		// policies are not searched for the role's ARN again at each of its requests.
		a.trust[role] = []statement{{Effect: "Allow", Principal: json.RawMessage(fmt.Sprintf(`{"AWS":"arn:aws:iam::%s:root"}`, a.res.Account)),
			Action: stringList{"sts:AssumeRole"}, Resource: stringList{role}}}
		a.policies[role] = outsiderStatements
		return outsiderStatements, nil
	}
	if found == nil {
		return nil, fmt.Errorf("no role %s in the templates", role)
	}
	var maxSession int
	a.asm.Prop(a.res, found, "MaxSessionDuration", &maxSession)
	a.maxSession[role] = maxSession
	if id, err := a.res.ResolveString(found.Stack, json.RawMessage(fmt.Sprintf(`{"Fn::GetAtt":[%q,"RoleId"]}`, found.LogicalID))); err == nil {
		a.roleIDs[role] = id
	}
	trust, err := a.res.Resolve(found.Stack, found.Properties["AssumeRolePolicyDocument"])
	if err != nil {
		return nil, fmt.Errorf("role %s: trust policy: %w", found.LogicalID, err)
	}
	b, _ := json.Marshal(trust)
	var td struct{ Statement []statement }
	if err := json.Unmarshal(b, &td); err != nil {
		return nil, fmt.Errorf("role %s: trust policy: %w", found.LogicalID, err)
	}
	for i := range td.Statement {
		if len(td.Statement[i].Resource) == 0 {
			td.Statement[i].Resource = stringList{role} // a trust policy is the role's own
		}
	}
	a.trust[role] = td.Statement
	var out []statement
	for _, p := range a.asm.OfType("AWS::IAM::Policy") {
		var roles []struct{ Ref string }
		json.Unmarshal(p.Properties["Roles"], &roles)
		if p.Stack != found.Stack || !slices.ContainsFunc(roles, func(r struct{ Ref string }) bool { return r.Ref == found.LogicalID }) {
			continue
		}
		doc, err := a.res.Resolve(p.Stack, p.Properties["PolicyDocument"])
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", p.LogicalID, err)
		}
		b, _ := json.Marshal(doc)
		var d struct{ Statement []statement }
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("policy %s: %w", p.LogicalID, err)
		}
		out = append(out, d.Statement...)
	}
	a.policies[role] = out
	return out, nil
}

// session returns the tenant session of a request's signature, if its access key is one.
func (a *tenantAuth) session(req *http.Request) (tenantSession, bool) {
	credential := req.URL.Query().Get("X-Amz-Credential") // a presigned request
	if h := req.Header.Get("Authorization"); credential == "" {
		i := strings.Index(h, "Credential=")
		if i < 0 {
			return tenantSession{}, false
		}
		credential = h[i+len("Credential="):]
	}
	key, _, _ := strings.Cut(credential, "/")
	if !strings.HasPrefix(key, sessionKeyPrefix) {
		return tenantSession{}, false
	}
	a.mu.Lock()
	s, ok := a.sessions[key]
	a.mu.Unlock()
	if !ok {
		return tenantSession{role: "unknown session"}, true // a key this STS never gave: refused
	}
	return s, true
}

// allowed evaluates the session's role policies for one action on one resource, with the request's
// condition keys (s3:prefix).
func (a *tenantAuth) allowed(s tenantSession, action, resource string, keys map[string]string) bool {
	ok, _ := a.decide(s, action, resource, keys)
	return ok
}

// decide evaluates the session's role policies and the policy of the resource (a bucket's, for its
// objects and itself; policyeval.go) for one action on one resource, with the request's condition
// keys; why says what refused it.
func (a *tenantAuth) decide(s tenantSession, action, resource string, keys map[string]string) (ok bool, why string) {
	a.mu.Lock()
	if a.judged == nil {
		a.judged = map[string]int{}
	}
	a.judged[s.role]++
	a.mu.Unlock()
	stmts, err := a.roleStatements(s.role)
	if err != nil {
		return false, err.Error()
	}
	resourceStmts, err := a.resourceStatements(resource)
	if err != nil {
		return false, err.Error() // a policy the run cannot read: fail closed
	}
	keys = maps.Clone(keys)
	if keys == nil {
		keys = map[string]string{}
	}
	if _, set := keys["aws:PrincipalArn"]; !set {
		keys["aws:PrincipalArn"] = s.role
	}
	if id, ok := a.userID(s); ok {
		keys["aws:userid"] = id
	}
	for k, v := range s.tags {
		keys["aws:PrincipalTag/"+k] = v // a session tag is a principal tag
	}
	allow := false
	judge := func(where string, st statement, grants bool) (denied bool, why string) {
		m := st.applies(s.tags, action, resource, keys)
		switch {
		case st.Effect == "Deny" && m != noMatch: // an explicit Deny, or one that cannot be ruled out
			why = fmt.Sprintf("explicit deny in %s (Sid %q)", where, st.Sid)
			if u := st.unsupported(); u != "" && m == unknown {
				why += "; the local run does not evaluate " + u + ", so the Deny is taken to apply"
			}
			return true, why
		case st.Effect == "Allow" && m == match && grants:
			allow = true
		}
		return false, ""
	}
	for _, st := range stmts {
		if denied, why := judge("the identity policy of "+s.role, st, true); denied {
			return false, why
		}
	}
	for _, st := range resourceStmts {
		names, grants := st.namesPrincipal(s.role)
		if !names {
			continue
		}
		if denied, why := judge("the resource policy of "+resource, st, grants); denied {
			return false, why
		}
	}
	if !allow {
		return false, "no Allow for " + action + " on " + resource
	}
	return true, ""
}

// s3Request is a request's IAM action, resource and condition keys
// (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html).
//
// A GET or HEAD of a version (?versionId=) takes s3:GetObjectVersion, not s3:GetObject
// (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html, "Permissions"); the parts
// of a multipart upload take s3:PutObject, its abort s3:AbortMultipartUpload and its listing
// s3:ListMultipartUploadParts (https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpuoverview.html#mpuAndPermissions).
func s3Request(req *http.Request) (action, resource string, keys map[string]string) {
	bucket, key := emulate.SplitPath(req.URL.Path)
	q := req.URL.Query()
	keys = map[string]string{"aws:SecureTransport": fmt.Sprint(secureTransport(req))}
	switch op := emulate.S3Operation(req); op {
	case "GetObject", "HeadObject":
		action = "s3:GetObject"
		if q.Has("versionId") {
			action = "s3:GetObjectVersion"
		}
	case "PutObject":
		action = "s3:PutObject"
		writeKeys(req, keys, true)
	case "DeleteObject":
		action = "s3:DeleteObject"
		if q.Has("versionId") {
			action = "s3:DeleteObjectVersion"
		}
	case "ListObjects":
		keys["s3:prefix"] = q.Get("prefix")
		return "s3:ListBucket", "arn:aws:s3:::" + bucket, keys
	case "MultipartPOST", "MultipartPUT": // create, upload a part, complete
		action = "s3:PutObject"
		// Only CompleteMultipartUpload creates the object; the create and the parts take no
		// conditional header.
		writeKeys(req, keys, req.Method == http.MethodPost && q.Has("uploadId"))
	case "MultipartDELETE":
		action = "s3:AbortMultipartUpload"
	case "MultipartGET":
		if key == "" {
			return "s3:ListBucketMultipartUploads", "arn:aws:s3:::" + bucket, keys
		}
		action = "s3:ListMultipartUploadParts"
	default:
		action = "s3:" + op // not granted to a tenant: refused
	}
	return action, "arn:aws:s3:::" + bucket + "/" + key, keys
}

// s3KMSAction is the KMS call S3 makes for a request on an object under SSE-KMS (kmsauth.go):
// kms:GenerateDataKey for a PutObject or CreateMultipartUpload, kms:Decrypt for a GetObject; ""
// for any other.
func s3KMSAction(req *http.Request) string {
	switch op := emulate.S3Operation(req); {
	case op == "PutObject", op == "MultipartPOST" && req.URL.Query().Has("uploads"):
		return "kms:GenerateDataKey"
	case op == "GetObject":
		return "kms:Decrypt"
	}
	return ""
}

// writeHeaderKeys are the condition keys of a write's request headers, by header
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html).
var writeHeaderKeys = map[string]string{
	"X-Amz-Server-Side-Encryption":                    "s3:x-amz-server-side-encryption",
	"X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id":     "s3:x-amz-server-side-encryption-aws-kms-key-id",
	"X-Amz-Server-Side-Encryption-Customer-Algorithm": "s3:x-amz-server-side-encryption-customer-algorithm",
	"X-Amz-Storage-Class":                             "s3:x-amz-storage-class",
	"If-None-Match":                                   "s3:if-none-match",
	"If-Match":                                        "s3:if-match",
}

// writeKeys adds a write's condition keys: the headers it sends (in its headers, or in a presigned
// URL's query), and s3:ObjectCreationOperation, true for the calls that create the object
// (PutObject, CopyObject, CompleteMultipartUpload) and false for CreateMultipartUpload and the
// parts, which take no conditional header.
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html
func writeKeys(req *http.Request, keys map[string]string, creates bool) {
	keys["s3:ObjectCreationOperation"] = fmt.Sprint(creates)
	q := req.URL.Query()
	for header, key := range writeHeaderKeys {
		if v := req.Header.Get(header); v != "" {
			keys[key] = v
			continue
		}
		for name, vs := range q {
			if strings.EqualFold(name, header) && len(vs) > 0 {
				keys[key] = vs[0]
			}
		}
	}
}

// secureTransport is aws:SecureTransport for a local request: TLS, or loopback, where the local
// endpoints stand in for AWS's HTTPS ones.
func secureTransport(req *http.Request) bool {
	if req.TLS != nil {
		return true
	}
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
}

// presignExpired reports whether a presigned request's X-Amz-Date plus X-Amz-Expires has passed.
// A presigned request whose expiry cannot be read is expired: it fails closed.
func presignExpired(req *http.Request, now time.Time) bool {
	q := req.URL.Query()
	if !q.Has("X-Amz-Expires") && !q.Has("X-Amz-Date") {
		return false // not presigned
	}
	signed, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	seconds, err2 := strconv.Atoi(q.Get("X-Amz-Expires"))
	return err != nil || err2 != nil || now.After(signed.Add(time.Duration(seconds)*time.Second))
}

// guardS3 refuses an S3 request of a tenant session that the session's role does not allow, with
// S3's AccessDenied (HTTP 403, https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html).
func (a *tenantAuth) guardS3(next http.Handler) http.Handler {
	refuse := func(w http.ResponseWriter, req *http.Request, status int, body string) {
		a.refuse()
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		if req.Method != http.MethodHead {
			io.WriteString(w, body)
		}
	}
	deny := func(w http.ResponseWriter, req *http.Request, body string) {
		refuse(w, req, http.StatusForbidden, body)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if presignExpired(req, time.Now()) {
			deny(w, req, strings.Replace(emulate.AccessDeniedBody, "<Message>Access Denied</Message>", "<Message>Request has expired</Message>", 1))
			return
		}
		if code, message := a.presignError(req); code != "" {
			body := strings.Replace(strings.Replace(emulate.AccessDeniedBody, "<Message>Access Denied</Message>", "<Message>"+message+"</Message>", 1),
				"<Code>AccessDenied</Code>", "<Code>"+code+"</Code>", 1)
			refuse(w, req, presignErrorStatus(code), body)
			return
		}
		if s, ok := a.session(req); ok {
			action, resource, keys := s3Request(req)
			ok, why := a.decide(s, action, resource, keys)
			if kmsAction := s3KMSAction(req); ok && kmsAction != "" {
				bucket, _ := emulate.SplitPath(req.URL.Path)
				if key, context := a.bucketKMS(bucket, resource, keys); key != "" {
					ok, why = a.kmsAllowed(s, kmsAction, key, "s3", context, secureTransport(req))
				}
			}
			if !ok {
				a.say("S3 %s %s: AccessDenied: %s", req.Method, req.URL.Path, why)
				deny(w, req, emulate.AccessDeniedBody)
				return
			}
		}
		next.ServeHTTP(w, req)
	})
}

// guardDynamoDB refuses a DynamoDB request of a tenant session that the session's role does not
// allow, with DynamoDB's AccessDeniedException, which DynamoDB sends with HTTP 400
// (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/CommonErrors.html).
func (a *tenantAuth) guardDynamoDB(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if s, ok := a.session(req); ok {
			body, _ := io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(body))
			var in struct{ TableName string }
			json.Unmarshal(body, &in)
			op := req.Header.Get("X-Amz-Target")
			op = op[strings.LastIndex(op, ".")+1:]
			table := fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/%s", a.res.Region, a.res.Account, in.TableName)
			keys := map[string]string{"aws:SecureTransport": fmt.Sprint(secureTransport(req))}
			if leading, ok := a.leadingKeys(op, in.TableName, body); ok {
				keys["dynamodb:LeadingKeys"] = leading
			}
			ok, why := a.decide(s, "dynamodb:"+op, table, keys)
			if key := a.tableKMS(in.TableName); ok && key != "" && slices.Contains(itemOps, op) {
				ok, why = a.kmsAllowed(s, "kms:Decrypt", key, "dynamodb",
					map[string]string{"aws:dynamodb:tableName": in.TableName, "aws:dynamodb:subscriberId": a.res.Account}, secureTransport(req))
			}
			if !ok {
				a.say("DynamoDB %s %s: AccessDeniedException: %s", op, table, why)
				a.refuse()
				w.Header().Set("Content-Type", "application/x-amz-json-1.0")
				w.Header().Set("X-Amzn-ErrorType", "AccessDeniedException")
				w.WriteHeader(http.StatusBadRequest)
				json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.dynamodb.v20120810#AccessDeniedException",
					"message": fmt.Sprintf("not authorized to perform dynamodb:%s on resource %s", op, table)})
				return
			}
		}
		next.ServeHTTP(w, req)
	})
}
