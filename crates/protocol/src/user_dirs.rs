//! Where ralph keeps a person's files outside any project: their config, and its state (the
//! list of running loops, a broker's lock).
//!
//! One function answers for both, so that every reader and writer of these directories agrees
//! on the same override rules: an explicit variable wins (`RALPH_STATE_DIR` for the state,
//! `XDG_CONFIG_HOME` for the config), then the platform's convention (`~/.local/state/ralph`
//! and `~/.config/ralph` on Linux).

use std::ffi::OsString;
use std::path::PathBuf;

/// The environment variable that moves ralph's state directory.
pub const STATE_DIR_ENV: &str = "RALPH_STATE_DIR";

/// Which of ralph's per-user directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserDir {
    /// The user's config: `$XDG_CONFIG_HOME/ralph`, else `~/.config/ralph` (on Linux).
    Config,
    /// ralph's state: `$RALPH_STATE_DIR`, else the user's state directory's `ralph`
    /// (`~/.local/state/ralph` on Linux; the local data directory on platforms without a
    /// state directory).
    State,
    /// ralph's data (the worktrees of `ralph run --worktree`): `$XDG_DATA_HOME/ralph`, else
    /// `~/.local/share/ralph` (on Linux). Never a temporary directory: it survives reboots.
    Data,
}

/// The directory `which` names; `None` when no variable sets it and there is no home
/// directory to put it in. An empty variable counts as unset.
pub fn user_dir(which: UserDir) -> Option<PathBuf> {
    let var = match which {
        UserDir::Config => "XDG_CONFIG_HOME",
        UserDir::State => STATE_DIR_ENV,
        UserDir::Data => "XDG_DATA_HOME",
    };
    resolve(which, std::env::var_os(var))
}

/// [`user_dir`], with its variable's value given.
fn resolve(which: UserDir, set: Option<OsString>) -> Option<PathBuf> {
    if let Some(dir) = set.filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        return Some(match which {
            // XDG_CONFIG_HOME is every program's; RALPH_STATE_DIR is ralph's own.
            UserDir::Config | UserDir::Data => dir.join("ralph"),
            UserDir::State => dir,
        });
    }
    let dirs = directories::ProjectDirs::from("", "", "ralph")?;
    Some(match which {
        UserDir::Config => dirs.config_dir().to_path_buf(),
        UserDir::Data => dirs.data_dir().to_path_buf(),
        UserDir::State => dirs
            .state_dir()
            .unwrap_or_else(|| dirs.data_local_dir())
            .to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variable_set_wins() {
        assert_eq!(
            resolve(UserDir::Config, Some("/xdg".into())),
            Some(PathBuf::from("/xdg/ralph"))
        );
        assert_eq!(
            resolve(UserDir::State, Some("/state".into())),
            Some(PathBuf::from("/state"))
        );
    }

    #[test]
    fn an_empty_variable_counts_as_unset() {
        for which in [UserDir::Config, UserDir::State] {
            assert_eq!(resolve(which, Some("".into())), resolve(which, None));
        }
    }

    #[test]
    fn without_a_variable_each_is_ralph_s_own_directory() {
        // Wherever the home directory is (tests run with one).
        let config = resolve(UserDir::Config, None).unwrap();
        let state = resolve(UserDir::State, None).unwrap();
        assert!(config.ends_with("ralph"), "{config:?}");
        assert!(state.ends_with("ralph"), "{state:?}");
        assert_ne!(config, state);
    }
}
