//! `physync-host token`: the token issuer on the command line. It mints a connect token for one player and one
//! match under the secret the server runs with, and prints it as hex for `physync-guest --token`; a matchmaker
//! does the same through [`physync_engine::shooter_net::mint_token`].

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use physync_engine::connection::{TokenError, TokenIssuer, unix_now};
use physync_engine::shooter_net::{PlayerClaims, mint_token};

use super::cli::{SecretError, token_key};

/// Arguments of `physync-host token`.
#[derive(Debug, Clone, Args)]
pub struct TokenArgs {
    /// The secret the server runs with (also read from PHYSYNC_SECRET).
    #[arg(long, env = "PHYSYNC_SECRET", hide_env_values = true)]
    pub secret: Option<String>,
    /// Mint under the public development passphrase (for a server started with `--dev`).
    #[arg(long)]
    pub dev: bool,
    /// Print a fresh random secret for `--secret` instead of a token.
    #[arg(long)]
    pub new_secret: bool,
    /// The match the token admits to.
    #[arg(long, default_value_t = 1)]
    pub match_id: u32,
    /// The player's name (at most 16 bytes; it keys the player's slot for reconnects).
    #[arg(long, default_value = "player")]
    pub name: String,
    /// An address the client reaches the match at (repeatable, at most 4).
    #[arg(long = "server", required_unless_present = "new_secret")]
    pub servers: Vec<SocketAddr>,
    /// Seconds the token stays valid from now (absolute: a server restart does not extend it).
    #[arg(long, default_value_t = 300)]
    pub valid_s: u64,
}

/// Why no token was printed.
#[derive(Debug, thiserror::Error)]
pub enum TokenCliError {
    /// The secret was refused.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// The token could not be minted.
    #[error(transparent)]
    Token(#[from] TokenError),
}

/// What `physync-host token` prints: a hex token, or with `--new-secret` a fresh secret.
pub fn run_token(args: &TokenArgs) -> Result<String, TokenCliError> {
    if args.new_secret {
        let bytes: [u8; 24] = rand::random();
        return Ok(bytes.iter().map(|b| format!("{b:02x}")).collect());
    }
    let key = token_key(args.secret.as_deref(), args.dev)?;
    let token = mint_token(
        &TokenIssuer::new(key),
        &mut rand::rng(),
        unix_now(),
        &PlayerClaims::new(args.match_id, &args.name),
        &args.servers,
        Duration::from_secs(args.valid_s),
    )?;
    Ok(token.to_hex())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use physync_engine::connection::ConnectToken;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: TokenArgs,
    }

    fn run(line: &[&str]) -> Result<String, TokenCliError> {
        let args = Wrapper::parse_from(std::iter::once("token").chain(line.iter().copied())).args;
        run_token(&args)
    }

    #[test]
    fn tokens_name_their_server_and_expire_when_asked() {
        let hex = run(&[
            "--secret",
            "s3cret",
            "--server",
            "127.0.0.1:40000",
            "--valid-s",
            "60",
        ])
        .unwrap();
        let token = ConnectToken::from_hex(&hex).unwrap();
        assert_eq!(token.server_addrs, ["127.0.0.1:40000".parse().unwrap()]);
        assert_eq!(token.expires_unix - token.created_unix, 60);
        assert!(matches!(
            run(&["--secret", "physync-dev", "--server", "127.0.0.1:1"]),
            Err(TokenCliError::Secret(SecretError::DevWithoutFlag))
        ));
        assert_eq!(run(&["--new-secret"]).unwrap().len(), 48);
    }
}
