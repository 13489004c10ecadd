use std::process::ExitCode;

use clap::Parser;
use ctxgate::cli::{Cli, Command, ContextCommand};
use ctxgate::store::{OpenedStore, display_url};
use ctxgate::{App, config, telemetry};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let settings = match config::load(cli.config.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ctxgate: configuration error: {e}");
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Command::CheckConfig => match toml::to_string_pretty(&settings) {
            Ok(text) => {
                println!("{text}");
                eprintln!("ctxgate: configuration is valid");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("ctxgate: cannot print the configuration: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Context(ContextCommand::Select {
            history,
            queries,
            budget_tokens,
        }) => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let result = ctxgate::context::offline::run(
                &settings,
                &history,
                &queries,
                budget_tokens,
                &mut out,
            )
            .await;
            match result.and_then(|()| std::io::Write::flush(&mut out).map_err(Into::into)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("ctxgate: context select failed: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Doctor => {
            let origin = cli.config.as_ref().map_or_else(
                || "the configuration".to_owned(),
                |p| p.display().to_string(),
            );
            let checks = ctxgate::doctor::run(&settings, &origin).await;
            for c in &checks {
                println!("{c}");
            }
            if checks
                .iter()
                .any(|c| c.status == ctxgate::doctor::Status::Fail)
            {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Command::Import { file, channel } => {
            let result = async {
                let store = OpenedStore::open(&settings.store).await?;
                store.migrate().await?;
                let done = ctxgate::context::offline::import(
                    store.shared().as_ref(),
                    &file,
                    &channel,
                    true,
                )
                .await;
                store.close().await;
                done
            }
            .await;
            match result {
                Ok(done) => {
                    println!(
                        "imported {} messages into {}",
                        done.messages,
                        display_url(&settings.store.url)
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("ctxgate: import failed: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Migrate { to: Some(target) } => {
            telemetry::init(&settings.telemetry);
            let copied = ctxgate::store::copy::sqlite_to_postgres(
                &settings.store,
                &target,
                &mut std::io::stderr(),
            )
            .await;
            match copied {
                Ok(report) => {
                    print!("{report}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("ctxgate: migrate --to failed: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Migrate { to: None } => {
            telemetry::init(&settings.telemetry);
            let result = async {
                let store = OpenedStore::open(&settings.store).await?;
                let applied = store.migrate().await?;
                store.close().await;
                Ok::<_, ctxgate::store::StoreError>(applied)
            }
            .await;
            match result {
                Ok(n) => {
                    println!(
                        "applied {n} migration(s) to {}",
                        display_url(&settings.store.url)
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("ctxgate: migration failed: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Serve => {
            telemetry::init(&settings.telemetry);
            let app = match App::build(settings).await {
                Ok(app) => app,
                Err(e) => {
                    tracing::error!("cannot start: {e:#}");
                    return ExitCode::FAILURE;
                }
            };
            let token = app.shutdown_token();
            tokio::spawn(async move {
                shutdown_signal().await;
                tracing::info!("shutdown requested; finishing running work");
                token.cancel();
            });
            match app.run().await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!("{e:#}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
