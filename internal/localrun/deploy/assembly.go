package deploy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Assembly is the set of synthesized CloudFormation templates of one cloud assembly (cdk.out).
type Assembly struct {
	Stacks []*Stack
}

// Stack is one synthesized template.
type Stack struct {
	Name      string
	Resources map[string]*Resource
	Outputs   map[string]Output
}

// Resource is one CloudFormation resource.
type Resource struct {
	Stack      *Stack
	LogicalID  string
	sharedID   bool                       // another stack has a resource of this logical id (PhysicalName)
	Type       string                     `json:"Type"`
	Properties map[string]json.RawMessage `json:"Properties"`
	Metadata   map[string]json.RawMessage `json:"Metadata"`
}

// Output is one stack output, possibly exported.
type Output struct {
	Value  json.RawMessage `json:"Value"`
	Export *struct {
		Name json.RawMessage `json:"Name"`
	} `json:"Export"`
}

// LoadAssembly reads every stack template listed in dir/manifest.json. A directory without a
// manifest is read as a plain set of *.template.json files (the hand-made fixtures of the tests).
func LoadAssembly(dir string) (*Assembly, error) {
	var files []string
	if b, err := os.ReadFile(filepath.Join(dir, "manifest.json")); err == nil {
		var m struct {
			Artifacts map[string]struct {
				Type       string `json:"type"`
				Properties struct {
					TemplateFile string `json:"templateFile"`
				} `json:"properties"`
			} `json:"artifacts"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("read %s/manifest.json: %w", dir, err)
		}
		for _, a := range m.Artifacts {
			if a.Type == "aws:cloudformation:stack" {
				files = append(files, filepath.Join(dir, a.Properties.TemplateFile))
			}
		}
	} else {
		files, _ = filepath.Glob(filepath.Join(dir, "*.template.json"))
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("no stack templates in %s: run make synth first", dir)
	}
	a := &Assembly{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var t struct {
			Resources map[string]*Resource `json:"Resources"`
			Outputs   map[string]Output    `json:"Outputs"`
		}
		if err := json.Unmarshal(b, &t); err != nil {
			return nil, fmt.Errorf("parse %s: %w", f, err)
		}
		s := &Stack{Name: strings.TrimSuffix(filepath.Base(f), ".template.json"), Resources: t.Resources, Outputs: t.Outputs}
		for id, r := range s.Resources {
			r.Stack, r.LogicalID = s, id
		}
		a.Stacks = append(a.Stacks, s)
	}
	// A logical id of more than one stack (two pools' stacks hold the same constructs) takes its
	// stack's name in its physical name (PhysicalName), so that the names stay apart.
	seen := map[string]int{}
	for _, s := range a.Stacks {
		for id := range s.Resources {
			seen[id]++
		}
	}
	for _, s := range a.Stacks {
		for id, r := range s.Resources {
			r.sharedID = seen[id] > 1
		}
	}
	return a, nil
}

// OfType lists the resources of one type across all stacks, in a stable order.
func (a *Assembly) OfType(typ string) []*Resource {
	var out []*Resource
	for _, s := range a.Stacks {
		for _, r := range s.Resources {
			if r.Type == typ {
				out = append(out, r)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Stack.Name != out[j].Stack.Name {
			return out[i].Stack.Name < out[j].Stack.Name
		}
		return out[i].LogicalID < out[j].LogicalID
	})
	return out
}

// Prop decodes one property of a resource after resolving its intrinsic functions.
func (a *Assembly) Prop(res *Resolver, r *Resource, name string, into any) error {
	raw, ok := r.Properties[name]
	if !ok {
		return nil
	}
	v, err := res.Resolve(r.Stack, raw)
	if err != nil {
		return fmt.Errorf("%s.%s: %w", r.LogicalID, name, err)
	}
	b, _ := json.Marshal(v)
	return json.Unmarshal(b, into)
}

// Identity is what a resource's Ref and Fn::GetAtt resolve to locally.
type Identity struct {
	Ref   string
	Attrs map[string]string
}

// Resolver evaluates the intrinsic functions a synthesized template uses (Ref, Fn::GetAtt,
// Fn::Join, Fn::Sub, Fn::Select, Fn::Split, Fn::ImportValue and the pseudo parameters), against
// local identities of the resources that the harness assigns as it creates them.
type Resolver struct {
	Assembly  *Assembly
	Region    string
	Account   string
	ids       map[string]Identity // stack/logicalID
	exports   map[string]exportRef
	resolving map[string]bool
}

type exportRef struct {
	stack *Stack
	value json.RawMessage
}

// NewResolver indexes the exports of every stack.
func NewResolver(a *Assembly, region, account string) (*Resolver, error) {
	r := &Resolver{Assembly: a, Region: region, Account: account, ids: map[string]Identity{}, exports: map[string]exportRef{}, resolving: map[string]bool{}}
	for _, s := range a.Stacks {
		for _, o := range s.Outputs {
			if o.Export == nil {
				continue
			}
			n, err := r.Resolve(s, o.Export.Name)
			if err != nil {
				return nil, fmt.Errorf("export name in %s: %w", s.Name, err)
			}
			r.exports[fmt.Sprint(n)] = exportRef{s, o.Value}
		}
	}
	return r, nil
}

// Set records the local identity of a resource.
func (r *Resolver) Set(res *Resource, id Identity) { r.ids[res.Stack.Name+"/"+res.LogicalID] = id }

// Identity returns the local identity of a resource, if assigned.
func (r *Resolver) Identity(res *Resource) (Identity, bool) {
	id, ok := r.ids[res.Stack.Name+"/"+res.LogicalID]
	return id, ok
}

// ResolveString resolves a value that must become a string.
func (r *Resolver) ResolveString(s *Stack, raw json.RawMessage) (string, error) {
	v, err := r.Resolve(s, raw)
	if err != nil {
		return "", err
	}
	str, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("want a string, got %T", v)
	}
	return str, nil
}

// Resolve evaluates every intrinsic function inside raw.
func (r *Resolver) Resolve(s *Stack, raw json.RawMessage) (any, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return r.eval(s, v)
}

func (r *Resolver) eval(s *Stack, v any) (any, error) {
	switch t := v.(type) {
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			x, err := r.eval(s, e)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case map[string]any:
		if len(t) == 1 {
			for k, arg := range t {
				if k == "Ref" || strings.HasPrefix(k, "Fn::") {
					return r.intrinsic(s, k, arg)
				}
			}
		}
		out := make(map[string]any, len(t))
		for k, e := range t {
			x, err := r.eval(s, e)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return out, nil
	default:
		return v, nil
	}
}

func (r *Resolver) intrinsic(s *Stack, fn string, arg any) (any, error) {
	switch fn {
	case "Ref":
		name, _ := arg.(string)
		return r.ref(s, name)
	case "Fn::GetAtt":
		var parts []string
		switch a := arg.(type) {
		case string:
			parts = strings.SplitN(a, ".", 2)
		case []any:
			for _, p := range a {
				x, err := r.eval(s, p)
				if err != nil {
					return nil, err
				}
				parts = append(parts, fmt.Sprint(x))
			}
		}
		if len(parts) != 2 {
			return nil, fmt.Errorf("bad Fn::GetAtt %v", arg)
		}
		return r.getAtt(s, parts[0], parts[1])
	case "Fn::Join":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, fmt.Errorf("bad Fn::Join")
		}
		items, err := r.eval(s, a[1])
		if err != nil {
			return nil, err
		}
		list, ok := items.([]any)
		if !ok {
			return nil, fmt.Errorf("Fn::Join of %T", items)
		}
		strs := make([]string, len(list))
		for i, e := range list {
			strs[i] = fmt.Sprint(e)
		}
		return strings.Join(strs, fmt.Sprint(a[0])), nil
	case "Fn::Select":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, fmt.Errorf("bad Fn::Select")
		}
		idx, err := r.eval(s, a[0])
		if err != nil {
			return nil, err
		}
		list, err := r.eval(s, a[1])
		if err != nil {
			return nil, err
		}
		var i int
		fmt.Sscan(fmt.Sprint(idx), &i)
		l, ok := list.([]any)
		if !ok || i < 0 || i >= len(l) {
			return nil, fmt.Errorf("Fn::Select index %d out of range", i)
		}
		return l[i], nil
	case "Fn::Split":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, fmt.Errorf("bad Fn::Split")
		}
		src, err := r.eval(s, a[1])
		if err != nil {
			return nil, err
		}
		var out []any
		for _, p := range strings.Split(fmt.Sprint(src), fmt.Sprint(a[0])) {
			out = append(out, p)
		}
		return out, nil
	case "Fn::ImportValue":
		name, err := r.eval(s, arg)
		if err != nil {
			return nil, err
		}
		e, ok := r.exports[fmt.Sprint(name)]
		if !ok {
			return nil, fmt.Errorf("no stack exports %v", name)
		}
		return r.Resolve(e.stack, e.value)
	case "Fn::Sub":
		var tmpl string
		vars := map[string]any{}
		switch a := arg.(type) {
		case string:
			tmpl = a
		case []any:
			if len(a) != 2 {
				return nil, fmt.Errorf("bad Fn::Sub")
			}
			tmpl, _ = a[0].(string)
			m, _ := a[1].(map[string]any)
			for k, e := range m {
				x, err := r.eval(s, e)
				if err != nil {
					return nil, err
				}
				vars[k] = x
			}
		}
		var b strings.Builder
		for {
			i := strings.Index(tmpl, "${")
			if i < 0 {
				b.WriteString(tmpl)
				break
			}
			j := strings.Index(tmpl[i:], "}")
			if j < 0 {
				return nil, fmt.Errorf("bad Fn::Sub template")
			}
			b.WriteString(tmpl[:i])
			name := tmpl[i+2 : i+j]
			tmpl = tmpl[i+j+1:]
			if strings.HasPrefix(name, "!") {
				b.WriteString("${" + name[1:] + "}")
				continue
			}
			var x any
			var err error
			if v, ok := vars[name]; ok {
				x = v
			} else if res, attr, ok := strings.Cut(name, "."); ok {
				x, err = r.getAtt(s, res, attr)
			} else {
				x, err = r.ref(s, name)
			}
			if err != nil {
				return nil, err
			}
			b.WriteString(fmt.Sprint(x))
		}
		return b.String(), nil
	}
	return nil, fmt.Errorf("unsupported intrinsic %s", fn)
}

func (r *Resolver) ref(s *Stack, name string) (any, error) {
	switch name {
	case "AWS::Region":
		return r.Region, nil
	case "AWS::AccountId":
		return r.Account, nil
	case "AWS::Partition":
		return "aws", nil
	case "AWS::URLSuffix":
		return "amazonaws.com", nil
	case "AWS::StackName":
		return s.Name, nil
	case "AWS::NoValue":
		return nil, nil
	}
	res, ok := s.Resources[name]
	if !ok {
		return nil, fmt.Errorf("Ref to unknown %s in %s", name, s.Name)
	}
	id, ok := r.Identity(res)
	if !ok {
		id, ok = r.modelledIdentity(s, name, res)
	}
	if !ok {
		return "local-" + strings.ToLower(name), nil
	}
	return id.Ref, nil
}

// modelledIdentity is the identity of a resource the local run creates nothing for but names as AWS
// does, because policies match its ARN: a role (roleIdentity), a rule (ruleName), a log group (its
// LogGroupName, or the name CloudFormation makes: a key policy names the log groups it serves by
// their names' stack prefix; its ARN ends in ":*", as Fn::GetAtt gives it) and a KMS key, whose
// ARN is arn:aws:kms:<region>:<account>:key/<key id>, its id a UUID (here made of the resource's
// name, so that a run's ARNs are the same from one run to the next), and a REST API, whose id an
// EventBridge target's execute-api ARN holds.
// https://docs.aws.amazon.com/kms/latest/developerguide/concepts.html#key-id-key-ARN
// https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-logs-loggroup.html
func (r *Resolver) modelledIdentity(s *Stack, logicalID string, res *Resource) (Identity, bool) {
	switch res.Type {
	case "AWS::IAM::Role":
		return r.roleIdentity(s, logicalID, res), true
	case "AWS::Events::Rule":
		name := r.ruleName(s, logicalID, res)
		return Identity{Ref: name, Attrs: map[string]string{"Arn": fmt.Sprintf("arn:aws:events:%s:%s:rule/%s", r.Region, r.Account, name)}}, true
	case "AWS::Logs::LogGroup":
		name := ""
		if raw, ok := res.Properties["LogGroupName"]; ok {
			name, _ = r.ResolveString(s, raw)
		}
		if name == "" {
			name = generatedName(s.Name, logicalID, MaxLogGroupName)
		}
		return Identity{Ref: name, Attrs: map[string]string{"Arn": fmt.Sprintf("arn:aws:logs:%s:%s:log-group:%s:*", r.Region, r.Account, name)}}, true
	case "AWS::ApiGateway::RestApi":
		// An API's id is 10 lower-case letters and digits, in its execute-api ARNs and URL.
		sum := sha256.Sum256([]byte(s.Name + "/" + logicalID))
		id := hex.EncodeToString(sum[:5])
		return Identity{Ref: id, Attrs: map[string]string{"RootResourceId": id[:6] + "root"}}, true
	case "AWS::KMS::Key":
		sum := sha256.Sum256([]byte(s.Name + "/" + logicalID))
		h := hex.EncodeToString(sum[:16])
		id := h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
		return Identity{Ref: id, Attrs: map[string]string{"Arn": fmt.Sprintf("arn:aws:kms:%s:%s:key/%s", r.Region, r.Account, id), "KeyId": id}}, true
	}
	return Identity{}, false
}

// roleIdentity is a role's name and ARN as IAM gives them: its RoleName, or a name CloudFormation
// makes of the stack's and the resource's names, and the ARN with the role's path, which policies
// match on (aws:PrincipalArn with a path's wildcard).
// https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-iam-role.html
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-arns
func (r *Resolver) roleIdentity(s *Stack, logicalID string, res *Resource) Identity {
	name := ""
	if raw, ok := res.Properties["RoleName"]; ok {
		name, _ = r.ResolveString(s, raw)
	}
	if name == "" {
		// A role name holds 64 characters.
		name = generatedName(s.Name, logicalID, 64)
	}
	path := "/"
	if raw, ok := res.Properties["Path"]; ok {
		if p, err := r.ResolveString(s, raw); err == nil && p != "" {
			path = p
		}
	}
	return Identity{Ref: name, Attrs: map[string]string{
		"Arn":    fmt.Sprintf("arn:aws:iam::%s:role%s%s", r.Account, path, name),
		"RoleId": "AROALOCAL" + strings.ToUpper(logicalID),
	}}
}

// MaxRuleName is EventBridge's limit on a rule's name.
// https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutRule.html
const MaxRuleName = 64

// MaxLogGroupName is CloudWatch Logs' limit on a log group's name.
// https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_CreateLogGroup.html
const MaxLogGroupName = 512

// ruleName is a rule's name as EventBridge keeps it, which its ARN ends in and key and queue
// policies match (aws:SourceArn): its Name, or the name CloudFormation makes (generatedName). A
// long logical id leaves too little of the stack name for a pattern rule/<stack name>-* to match.
func (r *Resolver) ruleName(s *Stack, logicalID string, res *Resource) string {
	if raw, ok := res.Properties["Name"]; ok {
		if n, err := r.ResolveString(s, raw); err == nil && n != "" {
			return n
		}
	}
	return generatedName(s.Name, logicalID, MaxRuleName)
}

// generatedName is the name CloudFormation makes for a resource without one,
// "<stack name>-<logical id>-<random>", in at most max characters. Its random part is here 12
// characters fixed by the names, so that a run's names are the same from one run to the next and
// two resources never share one. A longer name is cut as the names seen in the field are: the
// stack name first, then the logical id (AWS does not document how).
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-name.html
func generatedName(stackName, logicalID string, max int) string {
	sum := sha256.Sum256([]byte(stackName + "/" + logicalID))
	suffix := strings.ToUpper(hex.EncodeToString(sum[:6]))
	stack, id := stackName, logicalID
	if over := len(stack) + 1 + len(id) + 1 + len(suffix) - max; over > 0 {
		cut := min(over, len(stack)-1)
		stack, over = stack[:len(stack)-cut], over-cut
		if over > 0 {
			id = id[:len(id)-over]
		}
	}
	return stack + "-" + id + "-" + suffix
}

func (r *Resolver) getAtt(s *Stack, name, attr string) (any, error) {
	res, ok := s.Resources[name]
	if !ok {
		return nil, fmt.Errorf("Fn::GetAtt of unknown %s in %s", name, s.Name)
	}
	id, ok := r.Identity(res)
	if !ok {
		id, ok = r.modelledIdentity(s, name, res)
	}
	if ok {
		if v, ok := id.Attrs[attr]; ok {
			return v, nil
		}
	}
	// Resources the local run does not model (log groups, keys) get a stable placeholder ARN.
	return fmt.Sprintf("arn:aws:local:%s:%s:%s/%s", r.Region, r.Account, strings.ToLower(name), attr), nil
}
