//! `crawlworker settings`: without a spider, every setting with its
//! default and meaning (the catalogue, also as the book's Markdown table);
//! with one, every setting's value a worker would run it with and where
//! that value came from (default, configuration file, the spider's
//! `[settings]`, the environment, a flag), with the lower layers it
//! overrode. The layering is [`crate::settings`]'; this only prints it.

use std::path::Path;
use std::process::ExitCode;

use super::args::SettingsArgs;
use super::{load_config, output, setting_layers, ConfigArgs, InvalidInput};
use crate::settings::effective::{explain, Effective};
use crate::settings::Overrides;
use crate::spider::Spider;

pub(super) fn settings(args: SettingsArgs) -> anyhow::Result<ExitCode> {
    let Some(path) = &args.spider else {
        output::print(super::settings_table(args.markdown))?;
        return Ok(ExitCode::SUCCESS);
    };
    // Not read through clap's `env`: a CRAWLWORKER_CONFIG in the
    // environment must not make the catalogue's `settings` ask for a spider.
    let config = load_config(&ConfigArgs {
        config: args
            .config
            .or_else(|| std::env::var_os("CRAWLWORKER_CONFIG").map(Into::into)),
    })?;
    let cli = Overrides {
        redis_url: args.redis,
        concurrent_requests: args.concurrency,
        ..Overrides::default()
    };
    let spider = Spider::load(path).map_err(InvalidInput::from)?;
    let (_, explained) = explain(&setting_layers(&config, &spider, &cli)?);
    if args.json {
        for e in &explained {
            output::line(serde_json::json!({
                "setting": e.name,
                "value": e.value,
                "from": e.from,
                "over": e.over.iter().map(|(from, value)| serde_json::json!({"from": from, "value": value})).collect::<Vec<_>>(),
            }))?;
        }
    } else {
        output::print(table(path, &explained))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The effective settings, one per line: name, value, where it came from
/// (and what it overrode).
fn table(path: &Path, explained: &[Effective]) -> String {
    let value_width = explained
        .iter()
        .map(|e| e.value.chars().count())
        .max()
        .unwrap_or(5)
        .clamp(5, 40);
    let mut out = format!(
        "# the settings a worker runs {} with; precedence, lowest first: default < config file < spider [settings] < environment < flag\n",
        path.display()
    );
    out += &format!("{:<32} {:<value_width$} from\n", "setting", "value");
    for e in explained {
        let over = e
            .over
            .iter()
            .map(|(from, value)| format!("{from}: {value}"))
            .collect::<Vec<_>>();
        let over = if over.is_empty() {
            String::new()
        } else {
            format!(" (over {})", over.join(", "))
        };
        out += &format!(
            "{:<32} {:<value_width$} {}{over}\n",
            e.name, e.value, e.from
        );
    }
    out
}
