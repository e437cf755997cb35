//! `cairn-relay --listen ADDR (--data DIR | --postgres URL) [--max-message BYTES] [--write-rate N]
//! [--max-pending N] [--block-cache BYTES] [(--auth-secret FILE | --auth-jwks FILE) [--auth-audience AUD] [--auth-issuer ISS]]`

#![forbid(unsafe_code)]

use cairn_relay::frame::hex;
use cairn_relay::{AuthConfig, Limits, Relay, RelayConfig};
use std::path::PathBuf;

const USAGE: &str = "usage: cairn-relay --listen ADDR (--data DIR | --postgres URL) [--max-message BYTES] [--write-rate RECORDS_PER_S] [--max-pending FRAMES] [--block-cache BYTES] [(--auth-secret FILE | --auth-jwks FILE) [--auth-audience AUD] [--auth-issuer ISS]]";

fn parse(args: &[String]) -> Result<RelayConfig, String> {
    let mut listen = None;
    let mut data = None;
    let mut postgres = None;
    let mut limits = Limits::default();
    let mut auth: Option<AuthConfig> = None;
    let (mut audience, mut issuer) = (None, None);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        let number = |v: String| {
            v.parse::<u64>()
                .map_err(|_| format!("{flag}: {v:?} is not a number"))
        };
        match flag.as_str() {
            "--listen" => {
                let v = value()?;
                listen = Some(
                    v.parse()
                        .map_err(|_| format!("--listen: bad address {v:?}"))?,
                )
            }
            "--data" => data = Some(PathBuf::from(value()?)),
            "--postgres" => postgres = Some(value()?),
            "--max-message" => limits.max_message = number(value()?)? as usize,
            "--write-rate" => limits.write_rate = number(value()?)?.min(u32::MAX as u64) as u32,
            "--max-pending" => limits.max_pending = number(value()?)?.max(1) as usize,
            "--block-cache" => limits.block_cache = number(value()?)? as usize,
            "--auth-secret" | "--auth-jwks" => {
                if auth.is_some() {
                    return Err("--auth-secret and --auth-jwks: one of them, once".into());
                }
                let path = PathBuf::from(value()?);
                let config = if flag == "--auth-secret" {
                    AuthConfig::secret_file(&path)
                } else {
                    AuthConfig::jwks_file(&path)
                };
                auth = Some(config.map_err(|e| e.to_string())?);
            }
            "--auth-audience" => audience = Some(value()?),
            "--auth-issuer" => issuer = Some(value()?),
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    if (audience.is_some() || issuer.is_some()) && auth.is_none() {
        return Err("--auth-audience and --auth-issuer need --auth-secret or --auth-jwks".into());
    }
    let auth = auth.map(|mut a| {
        if let Some(aud) = audience {
            a = a.audience(aud);
        }
        if let Some(iss) = issuer {
            a = a.issuer(iss);
        }
        a
    });
    Ok(RelayConfig {
        listen: listen.ok_or_else(|| format!("--listen is required\n{USAGE}"))?,
        data: match (&data, &postgres) {
            (Some(d), _) => d.clone(),
            (None, Some(_)) => PathBuf::new(),
            (None, None) => return Err(format!("--data or --postgres is required\n{USAGE}")),
        },
        postgres,
        limits,
        auth,
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match parse(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("invariant: a runtime can be built");
    let result = runtime.block_on(async {
        let relay = Relay::start(config).await?;
        let l = relay.loaded();
        println!(
            "listening on {} relay {} (loaded {} lists, {} blocks, {} records, {} refused)",
            relay.local_addr(),
            hex(&relay.id().0),
            l.lists,
            l.blocks,
            l.records,
            l.refused
        );
        let _ = tokio::signal::ctrl_c().await;
        relay.shutdown().await
    });
    if let Err(e) = result {
        eprintln!("cairn-relay: {e}");
        std::process::exit(1);
    }
}
