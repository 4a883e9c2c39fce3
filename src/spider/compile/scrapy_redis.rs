//! `[scrapy_redis]`: which rule handles each request a scrapy-redis crawl
//! queued (`crawlworker import-queue`). Checks that every rule it names
//! exists; what a queued request becomes is `crate::scrapy_redis`'s.

use super::{Compiler, Names};
use crate::spider::file::ScrapyRedisFile;
use crate::spider::ScrapyRedis;

impl Compiler<'_> {
    pub(super) fn scrapy_redis(
        &self,
        file: Option<&ScrapyRedisFile>,
        rules: &Names<'_>,
    ) -> Option<ScrapyRedis> {
        let Some(file) = file else {
            return Some(ScrapyRedis::default());
        };
        let mut ok = true;
        let mut rule = |at: &crate::reader::At<String>| -> Option<String> {
            let found = self.lookup(at, rules, "rule").map(|i| rules[i].to_string());
            ok &= found.is_some();
            found
        };
        let callbacks: Vec<(String, String)> = file
            .callbacks
            .iter()
            .filter_map(|(callback, at)| Some((callback.value.clone(), rule(at)?)))
            .collect();
        let crawl_rules: Vec<String> = file
            .crawl_rules
            .iter()
            .flatten()
            .filter_map(&mut rule)
            .collect();
        let classes = file
            .classes
            .iter()
            .flatten()
            .map(|c| c.value.clone())
            .collect();
        ok.then_some(ScrapyRedis {
            callbacks,
            crawl_rules,
            classes,
        })
    }
}
