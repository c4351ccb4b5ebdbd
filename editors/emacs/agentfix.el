;;; agentfix.el --- Agent fix through eglot  -*- lexical-binding: t; -*-

;; Package-Requires: ((emacs "28.1") (eglot "1.9"))
;; Keywords: tools, languages

;;; Commentary:

;; agentfix is a language server (see the project's README).  eglot alone
;; is enough to use it: `eglot-code-actions' on a region offers
;; "Agent fix: selection", and eglot applies the proposal (the server's one
;; `workspace/applyEdit') after its y-or-n-p confirmation.
;;
;; eglot alone can also take a run that outlasts its request timeouts
;; (jsonrpc's 10 s): the server then answers `agentfix.fix' at once
;; ({runId, status: "started"}), the proposal still comes as one
;; `workspace/applyEdit' and the outcome as the notification
;; `agentfix/runEnded' (and `window/showMessage').  eglot 1.15 and
;; later (Emacs 30's 1.17) name themselves in `clientInfo' and get that
;; by default; older ones send no `clientInfo' (1.9 of Debian's Emacs 28,
;; 1.12 of Emacs 29): put `:initializationOptions (:delivery "async")' in
;; agentfix's entry of `eglot-server-programs'.
;;
;; This file adds what eglot lacks for agentfix:
;;
;; - `agentfix-fix': ask agentfix to fix the flymake diagnostics of the
;;   current line (or region), whatever flymake backend produced them
;;   (eglot only sends a server its own diagnostics, and agentfix publishes
;;   none); with a prefix argument, also an instruction.  It asks the
;;   server to answer at once (`agentfix-delivery') and waits for
;;   `agentfix/runEnded' without blocking Emacs.
;; - The `agentfix/runEnded' notification, whoever started the run (also
;;   a plain `eglot-code-actions'): its result goes to
;;   `agentfix-last-result' and its message to the echo area.
;; - `agentfix-cancel': cancels the runs started by `agentfix-fix', with
;;   `agentfix.cancel {runId}' for those answered at once and
;;   $/cancelRequest for the others (eglot 1.9 has no work-done progress,
;;   so there is no progress token to cancel).
;;
;; It uses a few eglot and jsonrpc internals (`eglot--pos-to-lsp-position',
;; `eglot--TextDocumentIdentifier', `eglot--signal-textDocument/didChange',
;; `jsonrpc--async-request-1'), as eglot extensions commonly do; they exist in
;; eglot 1.9 and later.

;;; Code:

(require 'cl-lib)
(require 'eglot)
(require 'jsonrpc)
(require 'flymake)

(defgroup agentfix nil
  "Agent fix through eglot."
  :group 'tools)

(defcustom agentfix-delivery "async"
  "How `agentfix-fix' asks the server to answer (the argument's `delivery').
\"async\": at once with the run's id, the outcome later as the
`agentfix/runEnded' notification, so no request waits on the run.
\"sync\": when the run and the review are over.  nil: as the server's
`delivery' setting says (for eglot 1.9, which sends no clientInfo, that
is synchronous unless the setting is \"async\")."
  :type '(choice (const "async") (const "sync")
                 (const :tag "The server's setting" nil)))

(defcustom agentfix-request-timeout 900
  "Seconds to wait for the answer of `agentfix.fix' when it is synchronous.
Not needed with the default `agentfix-delivery' (\"async\"), since the
server then answers at once and the run's end comes as a notification;
it matters only for runs answered when they are over (`agentfix-delivery'
\"sync\" or nil, or an agentfix older than its `delivery' setting), whose
server limit is `timeoutSecs' (300 s by default) plus your review."
  :type 'integer)

(defvar agentfix-last-result nil
  "The last `agentfix.fix' result plist, or (:error CODE MESSAGE).
For a run answered at once, the params of its `agentfix/runEnded'.")

(defvar agentfix--runs nil
  "Runs in progress, each a list (SERVER REQUEST-ID RUN-ID).
RUN-ID is set once the server has answered at once; until then (and for
synchronous runs) it is nil.")

(defvar agentfix--ended nil
  "(SERVER . RUN-ID) of runs whose `agentfix/runEnded' came before the answer.")

(defun agentfix--severity (type)
  "LSP severity of flymake diagnostic TYPE."
  (let ((name (symbol-name type)))
    (cond ((string-match-p "error" name) 1)
          ((string-match-p "warning" name) 2)
          (t 3))))

(defun agentfix--diagnostics (beg end)
  "The flymake diagnostics between BEG and END as LSP diagnostics."
  (vconcat
   (cl-loop for d in (flymake-diagnostics beg end)
            collect (list :range (list :start (eglot--pos-to-lsp-position
                                               (flymake-diagnostic-beg d))
                                       :end (eglot--pos-to-lsp-position
                                             (flymake-diagnostic-end d)))
                          :severity (agentfix--severity (flymake-diagnostic-type d))
                          :message (flymake-diagnostic-text d)
                          :source "flymake"))))

(defun agentfix--forget (pred)
  "Remove the runs for which PRED is true from `agentfix--runs'."
  (setq agentfix--runs (cl-remove-if pred agentfix--runs)))

(defun agentfix--report (result)
  "Record RESULT, a run's outcome (plist), and say it."
  (setq agentfix-last-result result)
  (if (equal (plist-get result :stopReason) "cancelled")
      (message "agentfix: cancelled; nothing was changed")
    (message "agentfix: %s (%s turn(s), %s+%s tokens)"
             (plist-get result :message) (plist-get result :turns)
             (plist-get result :inputTokens) (plist-get result :outputTokens))))

(defun agentfix--done (server id result error)
  "Record the end of the request ID on SERVER: RESULT, or ERROR (CODE . MESSAGE).
A RESULT with status \"started\" is not the end: the run goes on and
`agentfix/runEnded' ends it."
  (let ((run-id (plist-get result :runId)))
    (cond
     ((and (not error) (equal (plist-get result :status) "started"))
      (if (member (cons server run-id) agentfix--ended)
          ;; Its end came first.
          (progn (setq agentfix--ended (delete (cons server run-id) agentfix--ended))
                 (agentfix--forget (lambda (r) (and (eq (car r) server) (equal (nth 1 r) id)))))
        (dolist (run agentfix--runs)
          (when (and (eq (car run) server) (equal (nth 1 run) id))
            (setf (nth 2 run) run-id)))
        (message "agentfix: %s started, asking the model..." run-id)))
     (t
      (agentfix--forget (lambda (r) (and (eq (car r) server) (equal (nth 1 r) id))))
      (cond
       (error
        (setq agentfix-last-result (list :error (car error) (cdr error)))
        (if (eql (car error) -32800)
            (message "agentfix: cancelled; nothing was changed")
          (message "agentfix: %s" (cdr error))))
       (t (agentfix--report result)))))))

(cl-defmethod eglot-handle-notification
  (server (_method (eql agentfix/runEnded)) &rest result)
  "Handle agentfix's `agentfix/runEnded': a run answered at once is over.
RESULT is what `agentfix.fix' would have answered."
  (let* ((run-id (plist-get result :runId))
         (known (cl-find-if (lambda (r) (and (eq (car r) server) (equal (nth 2 r) run-id)))
                            agentfix--runs)))
    (cond
     (known (agentfix--forget (lambda (r) (eq r known))))
     ;; Started by `agentfix-fix' but not answered yet: note it for the answer.
     ((cl-find-if (lambda (r) (and (eq (car r) server) (null (nth 2 r)))) agentfix--runs)
      (push (cons server run-id) agentfix--ended)))
    (agentfix--report result)))

(defun agentfix--execute (server argument)
  "Run `agentfix.fix' with ARGUMENT on SERVER without blocking Emacs."
  (let* ((id nil)
         (argument (if (and agentfix-delivery (not (plist-member argument :delivery)))
                       (append argument (list :delivery agentfix-delivery))
                     argument))
         (params `(:command "agentfix.fix" :arguments [,argument]))
         (success (lambda (result) (agentfix--done server id result nil)))
         (failure (lambda (err)
                    (agentfix--done server id nil
                                    (cons (plist-get err :code)
                                          (plist-get err :message)))))
         (timeout (lambda ()
                    (agentfix--done server id nil
                                    (cons nil "no answer in time")))))
    (if (fboundp 'jsonrpc--async-request-1)
        (setq id (car (jsonrpc--async-request-1
                       server :workspace/executeCommand params
                       :success-fn success :error-fn failure
                       :timeout-fn timeout :timeout agentfix-request-timeout)))
      (jsonrpc-async-request server :workspace/executeCommand params
                             :success-fn success :error-fn failure
                             :timeout-fn timeout :timeout agentfix-request-timeout))
    (push (list server id nil) agentfix--runs)
    (message "agentfix: asking the model...")
    id))

;;;###autoload
(defun agentfix-fix (&optional instruction)
  "Ask agentfix to fix the diagnostics of the current line or region.
With a prefix argument, read an INSTRUCTION too (needed where there is
no diagnostic).  The proposal arrives as one workspace edit that eglot
applies to the buffers after asking."
  (interactive (list (when current-prefix-arg
                       (read-string "agentfix instruction: "))))
  (let* ((server (eglot--current-server-or-lose))
         (region (use-region-p))
         (beg (if region (region-beginning) (line-beginning-position)))
         (end (if region (region-end) (line-end-position)))
         (diagnostics (agentfix--diagnostics beg end))
         (instruction (and instruction (not (string-empty-p instruction)) instruction)))
    (eglot--signal-textDocument/didChange)
    (let* ((actions (jsonrpc-request
                     server :textDocument/codeAction
                     (list :textDocument (eglot--TextDocumentIdentifier)
                           :range (list :start (eglot--pos-to-lsp-position beg)
                                        :end (eglot--pos-to-lsp-position end))
                           :context (list :diagnostics diagnostics))))
           (pick (or (cl-find "quickfix" actions
                              :key (lambda (a) (plist-get a :kind)) :test #'equal)
                     (and (or instruction region)
                          (cl-find "refactor.rewrite" actions
                                   :key (lambda (a) (plist-get a :kind)) :test #'equal)))))
      (unless pick
        (user-error "agentfix: no diagnostic here; C-u M-x agentfix-fix to give an instruction, or select a region"))
      (let* ((command (plist-get pick :command))
             (argument (copy-sequence (aref (plist-get command :arguments) 0))))
        (when instruction
          (setq argument (plist-put argument :instruction instruction)))
        (agentfix--execute server argument)))))

;;;###autoload
(defun agentfix-cancel ()
  "Cancel the agentfix runs in progress.
A run answered at once is cancelled with `agentfix.cancel {runId}' (its
`agentfix/runEnded' then says \"cancelled\"); one still waiting for its
answer, with $/cancelRequest."
  (interactive)
  (if (null agentfix--runs)
      (message "agentfix: nothing to cancel")
    (pcase-dolist (`(,server ,id ,run-id) agentfix--runs)
      (cond
       (run-id
        (jsonrpc-async-request
         server :workspace/executeCommand
         `(:command "agentfix.cancel" :arguments [(:runId ,run-id)])
         :success-fn (lambda (r)
                       (unless (eq (plist-get r :cancelled) t)
                         ;; Over already: its runEnded is on its way or lost.
                         (agentfix--forget (lambda (x) (and (eq (car x) server)
                                                            (equal (nth 2 x) run-id))))))
         :error-fn #'ignore :timeout-fn #'ignore))
       (id
        (jsonrpc-notify server :$/cancelRequest (list :id id)))))
    (message "agentfix: cancelling...")))

(provide 'agentfix)
;;; agentfix.el ends here
