"""The pure core: parsing, rules and verdicts. No I/O, no clocks, no logging, stdlib only."""
