//! The login session in Redis: the session hash (a secret: its cookies log
//! anyone in) and the login lock, a string with a PX deadline. Each step
//! is one script (`session_lock`, `session_store`, `session_stale`), so
//! N workers that see the session logged out together mark it once, and
//! one of them logs in.

use std::time::Duration;

use super::protocol::{SessionLockArgs, SessionStaleArgs, SessionStoreArgs};
use super::scripts::SCRIPTS;
use super::RedisFrontier;
use crate::frontier::error::{err, Result};
use crate::frontier::{SessionLock, SessionLogin, SessionRecord};

impl RedisFrontier {
    pub(super) async fn read_session(&self) -> Result<SessionRecord> {
        let fields: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(&self.keys.session)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read the login session", &self.keys.session))?;
        Ok(SessionRecord::from_fields(&fields))
    }

    pub(super) async fn lock_session(
        &self,
        seen: u64,
        holder: &str,
        ttl: Duration,
    ) -> Result<SessionLock> {
        let args = SessionLockArgs {
            seen: seen.to_string(),
            holder: holder.to_string(),
            ttl_ms: ttl.as_millis().max(1).to_string(),
        };
        let out: Vec<String> = SCRIPTS
            .session_lock
            .call(&self.keys, self.sink.sink, args)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("take the login lock", &self.keys.session_lock))?;
        Ok(match out.first().map(String::as_str) {
            Some("fresh") => {
                let fields: Vec<(String, String)> = out[1..]
                    .chunks_exact(2)
                    .map(|kv| (kv[0].clone(), kv[1].clone()))
                    .collect();
                SessionLock::Fresh(SessionRecord::from_fields(&fields))
            }
            Some("taken") => SessionLock::Taken,
            _ => SessionLock::Busy,
        })
    }

    pub(super) async fn store_session(&self, holder: &str, login: &SessionLogin) -> Result<bool> {
        let args = SessionStoreArgs {
            holder: holder.to_string(),
            ok: if login.cookie.is_some() { "1" } else { "0" }.to_string(),
            cookie: login
                .cookie
                .as_ref()
                .map(|c| c.expose().to_string())
                .unwrap_or_default(),
            account: login.account.clone(),
            accounts: login.accounts.clone(),
            seen: login.seen.to_string(),
            keep_lock: if login.keep_lock { "1" } else { "0" }.to_string(),
        };
        let stored: u8 = SCRIPTS
            .session_store
            .call(&self.keys, self.sink.sink, args)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("store the login session in", &self.keys.session))?;
        Ok(stored == 1)
    }

    pub(super) async fn mark_session_stale(&self, generation: u64) -> Result<bool> {
        let args = SessionStaleArgs {
            generation: generation.to_string(),
        };
        let marked: u8 = SCRIPTS
            .session_stale
            .call(&self.keys, self.sink.sink, args)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("mark the login session stale in", &self.keys.session))?;
        Ok(marked == 1)
    }
}
