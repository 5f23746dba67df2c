//! The process's side of the in-flight model: the actor's turn and how the lock machine's
//! steps are carried out (as the lock actor carries them out), and what the properties
//! read from a state.

use super::*;

impl InFlightModel {
    pub(super) fn untold(state: &State) -> u32 {
        let holding = |phase: &&Phase| matches!(phase, Phase::Holding { told: false });
        state.callers.iter().filter(holding).count() as u32
    }

    /// Nothing in flight and nothing left to settle: Redis's count is final.
    pub(super) fn settled(state: &State) -> bool {
        let actor = &state.actor;
        state
            .callers
            .iter()
            .all(|phase| !matches!(phase, Phase::Trying { .. } | Phase::Granting { .. }))
            && actor.trying.is_none()
            && actor.unlocking.is_none()
            && actor.giving_back.is_none()
            && actor.force.is_none()
            && actor.reconciling.is_none()
            && actor.clears == 0
            && actor.unregistered == 0
            && actor.machine.doubts() == 0
            && state.wire.is_empty()
            && state.fast.counts_complete()
    }

    /// The actor's idle rule (its `refresh_keepalive`): the machine keeps nothing, and
    /// nothing is queued or out.
    pub(super) fn idle(actor: &Actor) -> bool {
        !actor.machine.busy()
            && actor.queue.is_empty()
            && actor.trying.is_none()
            && actor.unlocking.is_none()
            && actor.giving_back.is_none()
            && actor.reconciling.is_none()
            && actor.force.is_none()
            && actor.clears == 0
            && actor.unregistered == 0
    }

    /// Carries out the machine's steps, as the actor's `carry_out` does.
    pub(super) fn carry_out(state: &mut State, steps: Vec<Step<Taken, Doubt, u8>>) {
        for step in steps {
            match step {
                Step::Adopt(Taken { caller }) => {
                    state
                        .actor
                        .machine
                        .holder_entry(OWNER, Vec::new)
                        .push(caller as u64);
                }
                Step::Settle(Doubt(_)) => state.actor.machine.doubt(OWNER, ()),
                Step::Lose(owner) => {
                    for caller in state.actor.machine.remove(&owner).unwrap_or_default() {
                        state.callers[caller as usize] = Phase::Holding { told: true };
                    }
                }
                Step::LoseAll => {
                    for owner in state.actor.machine.owners() {
                        for caller in state.actor.machine.remove(&owner).unwrap_or_default() {
                            state.callers[caller as usize] = Phase::Holding { told: true };
                        }
                    }
                }
            }
        }
    }

    /// The actor's try is answered, as the actor's `attempt` reads the answer (`None`: no
    /// try had run).
    pub(super) fn actor_try_answered(state: &mut State) -> Option<()> {
        let Try {
            caller,
            ran: Some(ran),
            ticket,
            first,
            after_forget,
        } = state.actor.trying.take()?
        else {
            return None;
        };
        let answer = if ran {
            TryAnswer::Granted
        } else {
            TryAnswer::Busy
        };
        let mut outcome = state
            .actor
            .machine
            .try_answered(OWNER, ticket, answer, || ());
        if outcome == TryOutcome::Grant && first {
            // A first hold ends the holder counted, before the grant is made or given back.
            if after_forget {
                state.forgot = Forgot::Heard;
            }
            let machine = &mut state.actor.machine;
            let (steps, after) = machine.first_hold(OWNER, ticket, &mut state.fast, || ());
            Self::carry_out(state, steps);
            outcome = after;
        }
        match outcome {
            TryOutcome::Grant => Self::granted(state, caller),
            // Its waiter left: nothing to try again for.
            _ if state.callers[caller] == Phase::Dropped => {}
            // Stale (settled as a lost reply), busy: the waiter tries again.
            _ => state.actor.queue.push_front(caller),
        }
        Some(())
    }

    /// The actor's try granted the lock to `caller`: its `grant`, or (its waiter left while
    /// the grant was on its way) its `give_back`.
    pub(super) fn granted(state: &mut State, caller: usize) {
        if state.callers[caller] == Phase::Dropped {
            state.actor.machine.give_back_sent(OWNER);
            state.actor.giving_back = Some(false);
            state.wire.push_back(Action::GiveBackRuns);
            return;
        }
        let holder = state.actor.machine.holder_entry(OWNER, Vec::new);
        holder.push(caller as u64);
        state.fast.hand_out(|| Address);
        state.callers[caller] = Phase::Holding { told: false };
    }

    pub(super) fn take_charge(state: &mut State) {
        let steps = state.actor.machine.take_charge(&mut state.fast);
        Self::carry_out(state, steps);
    }

    /// One turn of the actor (its `drive`): absorb; with nothing of the queue out, send the
    /// oldest doubt's reconcile if the machine says it may go, then the head's try if the
    /// machine lets it; go idle when nothing is left.
    pub(super) fn actor_turn(state: &mut State) {
        Self::take_charge(state);
        let actor = &mut state.actor;
        if actor.trying.is_none() {
            if let NextReconcile::Send { counted, .. } =
                actor.machine.next_reconcile(&state.fast, |_| ())
            {
                actor.reconciling = Some((counted as u32, false));
                state.wire.push_back(Action::ReconcileRuns);
            }
            if let Some(&caller) = actor.queue.front() {
                if actor.machine.gate(&OWNER) == Gate::Go {
                    actor.queue.pop_front();
                    let ticket = actor.machine.try_sent();
                    actor.trying = Some(Try {
                        caller,
                        ran: None,
                        ticket,
                        first: false,
                        after_forget: false,
                    });
                    state.wire.push_back(Action::ActorTryRuns);
                }
            }
        }
        if Self::idle(&state.actor) {
            state.fast.actor_idle();
        }
    }
}
