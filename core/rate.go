package core

import (
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// RateConfig returns an enabled configuration with no rule and no exempt
// path whose default limit (rule "default") is lim, counted with algorithm
// a: one limit for every request, of any period (not only the whole units
// a Spec's limit strings can say) and with lim.Burst as given (0 means
// the count). Package outbound's Rate builds its configurations with it.
// The error names what is wrong with lim.
func RateConfig(a algo.Algorithm, lim algo.Limit) (*Config, error) {
	p := &store.Policy{Name: DefaultRuleName, Algorithm: a, Limits: []algo.Limit{lim}}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	c, err := NewConfig(Spec{Enabled: true, Algorithm: a.String(), ExemptPaths: []string{}})
	if err != nil {
		return nil, err
	}
	c.def = &Rule{Name: DefaultRuleName, Policy: p}
	c.def.prepare()
	c.enfDef = c.def
	return c, nil
}
