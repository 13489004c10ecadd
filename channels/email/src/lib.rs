//! E-mail for ctxgate (see `docs/` and the e-mail channel issue): parsing and normalisation,
//! RFC 5322 threading keys, RFC 3834 loop guards, IMAP tracking and SMTP replies.
