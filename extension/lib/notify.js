// notify.js keeps the person's desktop notifications for approval requests. An agent may open
// many requests at once (a burst: the server allows 20 per workspace, and a person may have
// several workspaces); one notification each would bury the person's screen. So there is one
// notification at a time: the first request of a quiet spell is shown at once, by name; requests
// that follow within COLLAPSE_MS are collapsed into that one notification, shown once the window
// ends as "12 requests waiting". Requests answered elsewhere take their notification away, or
// lower the count on the collapsed one without alerting again.

export const COLLAPSE_MS = 1500;
// MANY_ID is the collapsed notification's id; a single request's is `approval-<request id>`.
export const MANY_ID = 'approvals-waiting';

const ICON = 'icons/icon128.png';

// waitingText is the collapsed notification's message for n waiting requests.
export function waitingText(n) {
  return n === 1 ? '1 request waits for your answer.' : `${n} requests waiting for your answer.`;
}

const ours = (id) => id === MANY_ID || id.startsWith('approval-');

export class ApprovalNotices {
  // notifications is chrome.notifications (or a fake); now and the timer functions are looked up
  // late so tests can replace them.
  constructor({ notifications, now = () => Date.now(), setTimer = (f, ms) => setTimeout(f, ms), clearTimer = (t) => clearTimeout(t), log = console }) {
    Object.assign(this, { notifications, now, setTimer, clearTimer, log });
    this.chain = Promise.resolve(); // notification changes run one after another
    this.lastAlert = -Infinity; // when a notification last alerted the person
    this.timer = null; // set while a burst is being collapsed
    this.latest = null; // {pending, request}: what the collapsed notification will show
  }

  // show takes one approvals message ({pending, event, request}) and returns a promise that
  // settles once the changes it made at once are done (a collapsed alert comes later).
  show(m) {
    const request = m.request && m.request.id ? m.request : null;
    if (!(m.pending > 0)) {
      // None waiting (or the count after a welcome, which names no request): every notification
      // goes, including those of requests answered while this worker was not connected.
      this.cancelBurst();
      return this.queue(() => this.clearAll());
    }
    if (m.event === 'approval.created') return this.alert(m.pending, request);
    if (this.latest) this.latest.pending = m.pending;
    if (request) return this.queue(() => this.settled(m.pending, request));
    return this.chain;
  }

  alert(pending, request) {
    this.latest = { pending, request };
    if (this.timer) return this.chain; // collapsing: the timer shows the latest
    const wait = this.lastAlert + COLLAPSE_MS - this.now();
    if (wait <= 0) return this.flush();
    this.timer = this.setTimer(() => {
      this.timer = null;
      this.flush();
    }, wait);
    return this.chain;
  }

  flush() {
    const latest = this.latest;
    this.latest = null;
    this.lastAlert = this.now();
    return latest ? this.queue(() => this.render(latest)) : this.chain;
  }

  cancelBurst() {
    if (this.timer) this.clearTimer(this.timer);
    this.timer = null;
    this.latest = null;
  }

  queue(change) {
    this.chain = this.chain.then(change).catch((e) => this.log.warn('tabbridge: notification', e));
    return this.chain;
  }

  async render({ pending, request }) {
    const one = pending === 1 && request;
    const id = one ? `approval-${request.id}` : MANY_ID;
    await this.clearAll(id);
    await this.notifications.create(id, {
      type: 'basic', iconUrl: ICON,
      title: one ? 'Tabbridge: an agent asks' : 'Tabbridge: agents ask',
      message: one ? `${request.tool || 'A tool call'}${request.site ? ` on ${request.site}` : ''} waits for your answer.` : waitingText(pending),
    });
  }

  // settled takes away the notification of a request answered, expired or withdrawn, and lowers
  // the count on the collapsed notification (update does not alert again).
  async settled(pending, request) {
    await this.notifications.clear(`approval-${request.id}`);
    const shown = await this.notifications.getAll();
    if (shown[MANY_ID]) await this.notifications.update(MANY_ID, { message: waitingText(pending) });
  }

  async clearAll(except = '') {
    const shown = await this.notifications.getAll();
    await Promise.all(Object.keys(shown).filter((id) => ours(id) && id !== except).map((id) => this.notifications.clear(id)));
  }
}
