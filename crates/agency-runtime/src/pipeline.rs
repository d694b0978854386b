//! One way through. Every request that runs a turn — Chat Completions, the Responses API, the
//! playground, MQTT, the CLI — is a [`TurnRequest`] given to [`Runtime::begin`], which
//! authorizes its caller for the conversation, opens or continues that conversation (its lock
//! stays in the runtime) and hands back a [`Turn`]: awaited whole ([`Turn::outcome`]) or
//! watched as one stream of [`TurnEvent`]s ([`Turn::events`]).
//!
//! A face is then a *translator* (its request → a `TurnRequest`) and an *encoder* (the events
//! → its wire: Chat Completions chunks, Responses events, MQTT progress, the CLI's trace).
//! What must hold on every face — who may ask, what it may spend (`crate::spend`) — is
//! checked here, once.

use std::collections::VecDeque;
use std::sync::Arc;

use agency_core::{Agency, AgencyId, ApiKey, ConversationId, Face};
use futures::Stream;
use tokio::sync::broadcast;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::api::{ChatTurn, Opened};
use crate::{Event, Runtime, RuntimeError, TurnOutcome};

/// Who asks for a turn. A key is one the [`crate::keys::Authenticator`] let in (valid, not
/// revoked, within its rate limit); an owner is a signed-in account.
#[derive(Clone, Debug)]
pub enum Caller {
    /// This process itself (the CLI on its own database): may take any conversation's turn.
    Local,
    /// An account: its own agencies' conversations.
    Owner(String),
    /// The face that serves one agency's topics (MQTT): that agency's conversations.
    Agency(AgencyId),
    /// An API key: its agency's conversations.
    Key(ApiKey),
}

/// What the turn answers.
#[derive(Debug)]
pub enum Ask {
    /// A message of the end user to a conversation that exists.
    Message {
        conversation: ConversationId,
        text: String,
    },
    /// A stateless API request: its history continues, forks, seeds or resumes a conversation
    /// of the agency (see [`crate::api`]). Only a key asks this way.
    Chat {
        agency: Arc<Agency>,
        turn: Box<ChatTurn>,
    },
}

/// One request for a turn, as every face hands it over.
#[derive(Debug)]
pub struct TurnRequest {
    pub caller: Caller,
    pub ask: Ask,
    /// The answer's text as the manager's model writes it ([`TurnEvent::Text`]).
    pub stream_text: bool,
    /// What the agents do meanwhile ([`TurnEvent::Progress`]).
    pub progress: bool,
    /// The face the request came by, kept with the turn.
    pub face: Face,
}

impl TurnRequest {
    /// A message to a conversation, neither streamed nor watched, from the face its caller
    /// usually comes by (the CLI, the playground, MQTT; a face says otherwise).
    pub fn message(caller: Caller, conversation: ConversationId, text: String) -> Self {
        let face = match caller {
            Caller::Local => Face::Cli,
            Caller::Owner(_) => Face::Playground,
            Caller::Agency(_) => Face::Mqtt,
            Caller::Key(_) => Face::ChatCompletions,
        };
        Self {
            caller,
            ask: Ask::Message { conversation, text },
            stream_text: false,
            progress: false,
            face,
        }
    }
}

/// What a watched turn says, in order: text and progress as they come, then one of
/// `Finished` or `Failed`, last.
#[derive(Debug)]
pub enum TurnEvent {
    /// A piece of the answer (never empty), when the request asked for text.
    Text(String),
    /// One of the conversation's events (a hop, a model call, a tool's progress), when the
    /// request asked for progress.
    Progress(Event),
    /// The turn ended. `rest` is what of the answer did not stream: all of it when nothing
    /// did; when a streamed reply was not kept as the answer, a blank line and the whole
    /// answer; nothing when the turn paused on the client's tools.
    Finished { outcome: TurnOutcome, rest: String },
    /// The turn failed.
    Failed(RuntimeError),
}

/// A turn begun: its conversation is open and locked for it.
pub struct Turn {
    rt: Arc<Runtime>,
    conversation: ConversationId,
    run: Run,
    stream_text: bool,
    progress: Option<broadcast::Receiver<Event>>,
    face: Face,
}

enum Run {
    Message {
        guard: crate::lock::Locked,
        text: String,
        /// The key the message came with: its budgets pay.
        key: Option<ApiKey>,
    },
    Chat {
        key: ApiKey,
        opened: Opened,
        turn: Box<ChatTurn>,
    },
}

impl Runtime {
    /// Begins the turn `request` asks for: the caller authorized for its conversation, the
    /// conversation found or made, and locked. Errors here come before anything ran.
    pub async fn begin(self: &Arc<Self>, request: TurnRequest) -> Result<Turn, RuntimeError> {
        // Subscribed before the turn can say anything.
        let progress = request.progress.then(|| self.subscribe_local());
        let (conversation, run) = match request.ask {
            Ask::Message { conversation, text } => {
                self.authorize(&request.caller, conversation).await?;
                let guard = self.lock_conversation(conversation).await?;
                let key = match request.caller {
                    Caller::Key(key) => Some(key),
                    _ => None,
                };
                (conversation, Run::Message { guard, text, key })
            }
            Ask::Chat { agency, turn } => {
                let key = match request.caller {
                    Caller::Key(key) if key.agency_id == agency.id => key,
                    // Another's agency does not exist for this caller.
                    _ => return Err(RuntimeError::AgencyNotFound(agency.name.clone())),
                };
                // A spent budget refuses the turn before anything is stored; the calls'
                // reservations hold it (see `crate::spend`). No budget: no read.
                let end_user = turn.end_user.as_deref();
                if let Some(payer) = crate::spend::Payer::of(Some(&key), end_user, &agency) {
                    self.spending.check(&payer).await?;
                }
                let opened = Box::pin(self.api_conversation(&key, &agency, &turn)).await?;
                (opened.id(), Run::Chat { key, opened, turn })
            }
        };
        Ok(Turn {
            rt: self.clone(),
            conversation,
            run,
            stream_text: request.stream_text,
            progress,
            face: request.face,
        })
    }

    /// Whether `caller` may take a turn in `conversation` (another's is not found).
    async fn authorize(
        &self,
        caller: &Caller,
        conversation: ConversationId,
    ) -> Result<(), RuntimeError> {
        match caller {
            Caller::Local => Ok(()),
            Caller::Owner(owner) => self
                .conversations()
                .get(owner, conversation)
                .await
                .map(drop),
            Caller::Agency(agency) => self
                .conversations()
                .of(*agency, conversation)
                .await
                .map(drop),
            Caller::Key(key) => self
                .conversations()
                .of(key.agency_id, conversation)
                .await
                .map(drop),
        }
    }
}

impl Turn {
    /// The conversation the turn runs in.
    pub fn conversation(&self) -> ConversationId {
        self.conversation
    }

    /// Runs the turn here, to its end. Neither text nor progress is reported.
    pub async fn outcome(self) -> Result<TurnOutcome, RuntimeError> {
        // Boxed: a turn's future is tens of kilobytes, and a face's handler future, which
        // axum moves several times before it is polled, would otherwise hold it inline.
        Box::pin(self.run(None)).await
    }

    async fn run(
        self,
        answer: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    ) -> Result<TurnOutcome, RuntimeError> {
        match self.run {
            Run::Message { guard, text, key } => {
                let mut input = crate::session::TurnInput::text(text);
                input.face = Some(self.face);
                input.key = key;
                crate::turn::run(self.rt, guard, input, answer, None).await
            }
            Run::Chat { key, opened, turn } => {
                let mut given = self.rt.api_input(&key, opened.id(), *turn).await?;
                given.input.face = Some(self.face);
                let guard = opened.into_guard();
                crate::turn::run(self.rt, guard, given.input, answer, Some(given.api)).await
            }
        }
    }

    /// Runs the turn on a task of its own — it goes on, and is stored, should the stream be
    /// dropped — and reports it as events.
    pub fn events(mut self) -> impl Stream<Item = TurnEvent> + Send + 'static {
        let progress = self.progress.take();
        let (answer, text) = if self.stream_text {
            let (tx, rx) = unbounded_channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let conversation = self.conversation;
        let running =
            tokio::spawn(agency_telemetry::Span::current().run(self.run(answer).in_current_span()));
        let watch = Watch {
            conversation,
            text,
            progress,
            running: Some(running),
            streamed: String::new(),
            queued: VecDeque::new(),
        };
        futures::stream::unfold(watch, |mut w| async move { w.next().await.map(|e| (e, w)) })
    }
}

/// A running turn as it is watched.
struct Watch {
    conversation: ConversationId,
    text: Option<UnboundedReceiver<String>>,
    progress: Option<broadcast::Receiver<Event>>,
    running: Option<JoinHandle<Result<TurnOutcome, RuntimeError>>>,
    /// The answer's text streamed so far.
    streamed: String,
    /// Events of the conversation seen after the turn ended, before its end is told.
    queued: VecDeque<TurnEvent>,
}

impl Watch {
    async fn next(&mut self) -> Option<TurnEvent> {
        loop {
            if let Some(event) = self.queued.pop_front() {
                return Some(event);
            }
            let running = self.running.as_mut()?;
            // Biased, progress first: an event is published before the calls it leads to start,
            // so the hops before the answer are told before its text (a face that shows the
            // team's work closes it when the answer begins).
            tokio::select! {
                biased;
                event = recv_event(&mut self.progress) => match event {
                    Ok(event) if event.conversation() == Some(self.conversation) => {
                        return Some(TurnEvent::Progress(event));
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => self.progress = None,
                },
                piece = recv_text(&mut self.text) => match piece {
                    Some(piece) if piece.is_empty() => {}
                    Some(piece) => {
                        self.streamed.push_str(&piece);
                        return Some(TurnEvent::Text(piece));
                    }
                    // The turn answered: it sends no more.
                    None => self.text = None,
                },
                result = running => {
                    self.running = None;
                    self.end(result.unwrap_or_else(|e| {
                        Err(RuntimeError::Invalid(format!("the turn stopped: {e}")))
                    }));
                }
            }
        }
    }

    /// The turn's last events: what it said that was not read yet, then its end.
    fn end(&mut self, result: Result<TurnOutcome, RuntimeError>) {
        if let Some(text) = self.text.as_mut() {
            while let Ok(piece) = text.try_recv() {
                if !piece.is_empty() {
                    self.streamed.push_str(&piece);
                    self.queued.push_back(TurnEvent::Text(piece));
                }
            }
        }
        if let Some(progress) = self.progress.as_mut() {
            while let Ok(event) = progress.try_recv() {
                if event.conversation() == Some(self.conversation) {
                    self.queued.push_back(TurnEvent::Progress(event));
                }
            }
        }
        self.queued.push_back(match result {
            Ok(outcome) => {
                let rest = if !outcome.tool_calls.is_empty() || !outcome.approvals.is_empty() {
                    String::new()
                } else {
                    match outcome.answer.strip_prefix(self.streamed.as_str()) {
                        Some(rest) => rest.to_string(),
                        None => {
                            // Text streamed from a reply the agency did not keep as its answer.
                            tracing::warn!(
                                "a streamed answer was replaced; sending the final answer after it"
                            );
                            format!("\n\n{}", outcome.answer)
                        }
                    }
                };
                TurnEvent::Finished { outcome, rest }
            }
            Err(e) => TurnEvent::Failed(e),
        });
    }
}

/// The next piece of text, or never when none is wanted (any more).
async fn recv_text(text: &mut Option<UnboundedReceiver<String>>) -> Option<String> {
    match text {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The next event, or never when none is wanted (any more).
async fn recv_event(
    progress: &mut Option<broadcast::Receiver<Event>>,
) -> Result<Event, broadcast::error::RecvError> {
    match progress {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}
