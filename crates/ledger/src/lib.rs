//! Cumulative ledger rows, settle/absorbers, state file and billing export.
